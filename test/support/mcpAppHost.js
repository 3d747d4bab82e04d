// A minimal MCP Apps host for the browser (bundled by the test): the official client on the page's /mcp and the
// ext-apps app bridge, showing analyze_food's App in an iframe as a chat host does.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client"
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge"

/** MCP Apps: a tool is the App's to call unless its `_meta.ui.visibility` leaves out "app" (default ["model", "app"]). */
const visibleToApp = (tool) => {
  const visibility = tool?._meta?.ui?.visibility
  return tool !== undefined && (visibility === undefined || visibility.includes("app"))
}

window.startHost = async (key) => {
  const client = new Client({ name: "test-host", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } })
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/mcp", location.href), {
      requestInit: { headers: key === "" ? {} : { authorization: `Bearer ${key}` } }
    })
  )
  const { tools } = await client.listTools()
  const uri = tools.find((t) => t.name === "analyze_food")?._meta?.ui?.resourceUri
  const { contents } = await client.readResource({ uri })

  const iframe = document.createElement("iframe")
  iframe.id = "app"
  iframe.setAttribute("sandbox", "allow-scripts allow-same-origin")
  document.body.append(iframe)
  const bridge = new AppBridge(
    client,
    { name: "test-host", version: "1.0.0" },
    { serverTools: {}, updateModelContext: { text: {}, structuredContent: {} }, message: { text: {} } }
  )
  const host = {
    protocolVersion: client.getNegotiatedProtocolVersion(),
    resourceMimeType: contents[0]?.mimeType,
    // What the App handed to the model with ui/update-model-context, and the chat messages it sent with ui/message.
    modelContext: [],
    messages: [],
    // The tools the App called through the host, by name.
    appToolCalls: [],
    // The model calls analyze_food itself; the host shows the result in the App.
    callAsModel: async (args) => {
      const result = await client.callTool({ name: "analyze_food", arguments: args })
      await bridge.sendToolInput({ arguments: args })
      await bridge.sendToolResult(result)
      return result
    }
  }
  bridge.onupdatemodelcontext = async (params) => {
    host.modelContext.push(params)
    return {}
  }
  bridge.onmessage = async (params) => {
    host.messages.push(params)
    return {}
  }
  bridge.addEventListener("sizechange", ({ height }) => {
    if (height !== undefined) iframe.style.height = `${height}px`
  })
  const initialized = new Promise((resolve) => {
    bridge.oninitialized = () => resolve()
  })
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow))
  // As the spec asks of hosts: the App may call only this server's tools that are visible to it.
  bridge.oncalltool = async (params) => {
    if (!visibleToApp(tools.find((t) => t.name === params.name))) throw new Error(`${params.name} is not a tool of this App`)
    host.appToolCalls.push(params.name)
    return client.callTool(params)
  }
  iframe.srcdoc = contents[0]?.text ?? ""
  await initialized
  window.host = host
}
