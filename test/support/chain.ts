/** A real local EVM chain for tests: hardhat's in-process EDR (chain id 8453) behind a 127.0.0.1 JSON-RPC endpoint, with a FiatTokenV2-like test USDC. */
import { readFileSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { fileURLToPath } from "node:url"
import { Context, Effect, Layer } from "effect"
import { createHardhatRuntimeEnvironment } from "hardhat/hre"
import solc from "solc"
import {
  type Abi,
  type Address,
  createWalletClient,
  type Hex,
  http,
  keccak256,
  parseAbi,
  parseEventLogs,
  toHex
} from "viem"
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts"
import { createPaymentClient, type PaymentClient, paymentChain } from "../../src/x402/EvmChain.ts"
import { closeServer, readBody } from "./http.ts"

export const CHAIN_ID = 8453
export const MULTICALL3_ADDRESS: Address = "0xcA11bde05977b3631167028862bE2a173976CA11"
/** Test USDC every payer starts with: 100 USDC in 6-decimal units. */
export const PAYER_FUNDS = 100_000_000n

export const tokenAbi = parseAbi([
  "function name() view returns (string)",
  "function version() view returns (string)",
  "function decimals() view returns (uint8)",
  "function balanceOf(address) view returns (uint256)",
  "function transfer(address to, uint256 value) returns (bool)",
  "function mint(address to, uint256 amount) returns (bool)",
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
  "function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature)",
  "event Transfer(address indexed from, address indexed to, uint256 value)",
  "event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce)"
])

interface Compiled {
  readonly abi: Abi
  readonly bytecode: Hex
  readonly deployedBytecode: Hex
}

interface SolcOutput {
  readonly errors?: ReadonlyArray<{ severity: string; formattedMessage: string }>
  readonly contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string }; deployedBytecode: { object: string } } }>>
}

const contractsDir = fileURLToPath(new URL("./contracts/", import.meta.url))

let compiled: Promise<Record<"TestUSDC" | "Multicall3", Compiled>> | undefined

/** Compiles the test contracts with solc-js (offline, wasm) once per process. */
export const compileContracts = () => {
  compiled ??= Promise.resolve().then(() => {
    const sources = Object.fromEntries(
      ["TestUSDC.sol", "Multicall3.sol"].map((file) => [file, { content: readFileSync(contractsDir + file, "utf8") }])
    )
    const input = {
      language: "Solidity",
      sources,
      settings: {
        optimizer: { enabled: true, runs: 200 },
        evmVersion: "cancun",
        outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } }
      }
    }
    const compile: (input: string) => string = solc.compile
    const output: SolcOutput = JSON.parse(compile(JSON.stringify(input)))
    const errors = (output.errors ?? []).filter((e) => e.severity === "error")
    if (errors.length > 0) throw new Error(errors.map((e) => e.formattedMessage).join("\n"))
    const pick = (file: string, name: string): Compiled => {
      const c = output.contracts[file]?.[name]
      if (!c) throw new Error(`solc produced no ${name}`)
      return { abi: c.abi, bytecode: `0x${c.evm.bytecode.object}`, deployedBytecode: `0x${c.evm.deployedBytecode.object}` }
    }
    return { TestUSDC: pick("TestUSDC.sol", "TestUSDC"), Multicall3: pick("Multicall3.sol", "Multicall3") }
  })
  return compiled
}

/** Deterministic test keys, so failures are reproducible. */
const keyFor = (label: string): Hex => keccak256(toHex(`morsel local chain ${label}`))

export interface ChainAccounts {
  /** Deploys and mints the token; never pays. */
  readonly deployer: PrivateKeyAccount
  /** Pays gas for self-settlement (X402_SETTLER_PRIVATE_KEY). */
  readonly settler: PrivateKeyAccount
  /** A second gas wallet, e.g. for an in-process facilitator. */
  readonly facilitator: PrivateKeyAccount
  /** Payers funded with PAYER_FUNDS test USDC each. */
  readonly payers: ReadonlyArray<PrivateKeyAccount>
  /** An unfunded payer (no test USDC). */
  readonly pauper: PrivateKeyAccount
  /** The seller (X402_PAY_TO); holds nothing at start. */
  readonly payTo: PrivateKeyAccount
}

export interface LocalChain {
  readonly rpcUrl: string
  readonly chainId: number
  readonly token: Address
  readonly accounts: ChainAccounts
  readonly publicClient: PaymentClient
  /** Env entries that point the server's x402 settings at this chain. */
  readonly env: Readonly<Record<string, string>>
  readonly balanceOf: (address: Address) => Promise<bigint>
  /** Token transfers from `from` to `to` since genesis (the "exactly one transfer" check). */
  readonly transfers: (from: Address, to: Address) => Promise<ReadonlyArray<{ readonly transactionHash: Hex; readonly value: bigint }>>
  readonly authorizationUsed: (authorizer: Address, nonce: Hex) => Promise<boolean>
  /** Stop mining: transactions wait in the mempool until `resumeMining` or `mine`. */
  readonly pauseMining: () => Promise<void>
  /** Mine what waits in the mempool and mine every later transaction at once again. */
  readonly resumeMining: () => Promise<void>
  readonly mine: () => Promise<void>
  /** Move the chain's clock forward (takes effect with the next block). */
  readonly advanceTime: (seconds: number) => Promise<void>
  /** Drop a transaction from the mempool, as a congested or restarted node may. */
  readonly dropTransaction: (hash: Hex) => Promise<boolean>
  readonly pendingTransactions: () => Promise<number>
  readonly close: () => Promise<void>
}

interface JsonRpcRequest {
  readonly jsonrpc?: string
  readonly id?: unknown
  readonly method: string
  readonly params?: ReadonlyArray<unknown>
}

interface Eip1193 {
  request(args: { method: string; params?: ReadonlyArray<unknown> }): Promise<unknown>
}


const errorOf = (e: unknown) => {
  const obj = typeof e === "object" && e !== null ? (e as { code?: unknown; message?: unknown; data?: unknown }) : {}
  return {
    code: typeof obj.code === "number" ? obj.code : -32603,
    message: typeof obj.message === "string" ? obj.message : String(e),
    ...(obj.data !== undefined ? { data: obj.data } : {})
  }
}

/** Serves an EIP-1193 provider as HTTP JSON-RPC on 127.0.0.1 (single and batch requests). */
const serveJsonRpc = async (provider: Eip1193): Promise<Server> => {
  const answer = async (call: JsonRpcRequest) => {
    try {
      const result = await provider.request({ method: call.method, params: call.params ?? [] })
      return { jsonrpc: "2.0", id: call.id ?? null, result: result ?? null }
    } catch (e) {
      return { jsonrpc: "2.0", id: call.id ?? null, error: errorOf(e) }
    }
  }
  const server = createServer((req, res) => {
    readBody(req)
      .then(async (text) => {
        const body: JsonRpcRequest | ReadonlyArray<JsonRpcRequest> = JSON.parse(text)
        const reply = Array.isArray(body) ? await Promise.all(body.map(answer)) : await answer(body as JsonRpcRequest)
        res.writeHead(200, { "content-type": "application/json" })
        res.end(JSON.stringify(reply, (_k, v) => (typeof v === "bigint" ? toHex(v) : v)))
      })
      .catch((e: unknown) => {
        res.writeHead(400, { "content-type": "application/json" })
        res.end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32700, message: String(e) } }))
      })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return server
}

/** Starts the chain, deploys the test token and Multicall3, and funds the payers. */
export const startChain = async (options: { readonly payers?: number } = {}): Promise<LocalChain> => {
  const artifacts = await compileContracts()
  const accounts: ChainAccounts = {
    deployer: privateKeyToAccount(keyFor("deployer")),
    settler: privateKeyToAccount(keyFor("settler")),
    facilitator: privateKeyToAccount(keyFor("facilitator")),
    payers: Array.from({ length: options.payers ?? 4 }, (_, i) => privateKeyToAccount(keyFor(`payer ${i}`))),
    pauper: privateKeyToAccount(keyFor("pauper")),
    payTo: privateKeyToAccount(keyFor("pay to"))
  }
  const ether = "1000000000000000000000"
  const gasKeys = [keyFor("deployer"), keyFor("settler"), keyFor("facilitator")]
  const hre = await createHardhatRuntimeEnvironment(
    {
      networks: {
        local: {
          type: "edr-simulated",
          chainType: "l1",
          chainId: CHAIN_ID,
          accounts: gasKeys.map((privateKey) => ({ privateKey, balance: ether }))
        }
      }
    },
    {},
    process.cwd()
  )
  const connection = await hre.network.connect({ network: "local" })
  const provider: Eip1193 = connection.provider
  const server = await serveJsonRpc(provider)
  const rpcUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const chain = paymentChain(rpcUrl)
  const publicClient = createPaymentClient(rpcUrl, { pollingInterval: 50 })
  const deployer = createWalletClient({ account: accounts.deployer, chain, transport: http(rpcUrl, { retryCount: 0 }) })

  const deployHash = await deployer.deployContract({ abi: artifacts.TestUSDC.abi, bytecode: artifacts.TestUSDC.bytecode })
  const deployed = await publicClient.waitForTransactionReceipt({ hash: deployHash })
  const token = deployed.contractAddress
  if (!token) throw new Error("test token deployment produced no address")
  await provider.request({ method: "hardhat_setCode", params: [MULTICALL3_ADDRESS, artifacts.Multicall3.deployedBytecode] })
  for (const payer of accounts.payers) {
    const hash = await deployer.writeContract({ address: token, abi: tokenAbi, functionName: "mint", args: [payer.address, PAYER_FUNDS] })
    await publicClient.waitForTransactionReceipt({ hash })
  }

  const balanceOf = (address: Address) => publicClient.readContract({ address: token, abi: tokenAbi, functionName: "balanceOf", args: [address] })

  return {
    rpcUrl,
    chainId: CHAIN_ID,
    token,
    accounts,
    publicClient,
    env: {
      X402_PAY_TO: accounts.payTo.address,
      X402_ASSET: token,
      X402_RPC_URL: rpcUrl,
      X402_SETTLER_PRIVATE_KEY: keyFor("settler")
    },
    balanceOf,
    transfers: async (from, to) => {
      const logs = await publicClient.getLogs({ address: token, fromBlock: 0n, toBlock: "latest" })
      return parseEventLogs({ abi: tokenAbi, eventName: "Transfer", logs })
        .filter((l) => l.args.from.toLowerCase() === from.toLowerCase() && l.args.to.toLowerCase() === to.toLowerCase())
        .map((l) => ({ transactionHash: l.transactionHash, value: l.args.value }))
    },
    authorizationUsed: (authorizer, nonce) =>
      publicClient.readContract({ address: token, abi: tokenAbi, functionName: "authorizationState", args: [authorizer, nonce] }),
    pauseMining: async () => {
      await provider.request({ method: "evm_setAutomine", params: [false] })
    },
    resumeMining: async () => {
      await provider.request({ method: "evm_setAutomine", params: [true] })
      await provider.request({ method: "evm_mine", params: [] })
    },
    mine: async () => {
      await provider.request({ method: "evm_mine", params: [] })
    },
    advanceTime: async (seconds) => {
      await provider.request({ method: "evm_increaseTime", params: [seconds] })
    },
    dropTransaction: async (hash) => (await provider.request({ method: "hardhat_dropTransaction", params: [hash] })) === true,
    pendingTransactions: async () => {
      const block = await provider.request({ method: "eth_getBlockByNumber", params: ["pending", false] })
      const txs = typeof block === "object" && block !== null && "transactions" in block ? block.transactions : []
      return Array.isArray(txs) ? txs.length : 0
    },
    close: async () => {
      await closeServer(server)
      await connection.close()
    }
  }
}

/** The local chain as an Effect service, started once per layer and closed with it. */
export class Chain extends Context.Tag("test/Chain")<Chain, LocalChain>() {
  static readonly layer = (options: { readonly payers?: number } = {}) =>
    Layer.scoped(
      Chain,
      Effect.acquireRelease(
        Effect.promise(() => startChain(options)),
        (chain) => Effect.promise(() => chain.close())
      )
    )
}
