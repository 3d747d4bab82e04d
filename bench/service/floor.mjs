/**
 * The floor of the service benchmark, run by plain Node with nothing of morsel loaded: a bare `node:http` server
 * that reads the body, parses the JSON, decodes the base64, reads the JPEG's size from its SOF marker, downscales
 * the photo to 1024 px with sharp at its defaults and sends it to the benchmark's model ($MODEL_URL, the service's
 * too) as a chat completion, whose answer it reads. GET /health answers fixed bytes; POST /set stores bytes that any
 * other POST then answers (the replay baseline). Prints `READY <port>` once listening on 127.0.0.1:$PORT.
 */
import { Agent, createServer, request as post } from "node:http"
import sharp from "sharp"

/** Width and height from the first start-of-frame marker (SOF0–SOF15 except DHT, JPG and DAC). */
const jpegSize = (bytes) => {
  let at = 2
  while (at + 9 < bytes.length) {
    const marker = bytes[at + 1]
    const length = bytes.readUInt16BE(at + 2)
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) {
      return { height: bytes.readUInt16BE(at + 5), width: bytes.readUInt16BE(at + 7) }
    }
    at += 2 + length
  }
  throw new Error("no JPEG start-of-frame marker")
}

const readBody = (request) =>
  new Promise((resolve, reject) => {
    const chunks = []
    request.on("data", (chunk) => chunks.push(chunk))
    request.on("end", () => resolve(Buffer.concat(chunks)))
    request.on("error", reject)
  })

const modelUrl = new URL(`${process.env.MODEL_URL ?? "http://127.0.0.1:9/v1"}/chat/completions`)
const agent = new Agent({ keepAlive: true })

/** The photo to the model as the service sends it (a data URL in a user message), and the model's answer parsed. */
const askModel = (jpeg) =>
  new Promise((resolve, reject) => {
    const body = JSON.stringify({
      model: "bench",
      messages: [{ role: "user", content: [{ type: "text", text: "Estimate the meal." }, { type: "image_url", image_url: { url: `data:image/jpeg;base64,${jpeg.toString("base64")}` } }] }]
    })
    const req = post(modelUrl, { method: "POST", agent, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      readBody(res).then((bytes) => resolve(JSON.parse(JSON.parse(bytes.toString("utf8")).choices[0].message.content)), reject)
    })
    req.on("error", reject)
    req.end(body)
  })

const health = Buffer.from(JSON.stringify({ status: "ok" }))
let replay = Buffer.from("{}")

const server = createServer(async (request, response) => {
  try {
    const body = await readBody(request)
    if (request.url === "/set") {
      replay = body
      response.writeHead(204).end()
    } else if (request.url === "/health") {
      response.writeHead(200, { "content-type": "application/json" }).end(health)
    } else if (request.url === "/v1/analyze?decode") {
      const image = Buffer.from(JSON.parse(body.toString("utf8")).image_base64, "base64")
      const { width, height } = jpegSize(image)
      const prepared = await sharp(image)
        .autoOrient()
        .resize({ width: 1024, height: 1024, fit: "inside", withoutEnlargement: true })
        .jpeg({ quality: 85 })
        .toBuffer()
      const meal = await askModel(prepared)
      response.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ width, height, bytes: prepared.length, items: meal.items.length }))
    } else {
      response.writeHead(200, { "content-type": "application/json" }).end(replay)
    }
  } catch (error) {
    response.writeHead(500).end(String(error))
  }
})
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => process.stdout.write(`READY ${server.address().port}\n`))
