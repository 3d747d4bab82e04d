// One purchase and one analysis against a running `morsel serve --sandbox`, with fetch only; exits 1 on any surprise.
import { randomBytes, randomUUID } from "node:crypto"
import sharp from "sharp"

const base = process.argv[2]
const fail = (message) => {
  console.log(`FAIL node22: ${message}`)
  process.exit(1)
}

for (let i = 0; ; i++) {
  if (i > 480) fail("the sandbox did not answer /health within 120 s")
  try {
    if ((await fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) })).ok) break
  } catch {}
  await new Promise((resolve) => setTimeout(resolve, 250))
}

const key = `morsel_test_${randomBytes(32).toString("hex")}`
const post = (path, body, headers = {}) =>
  fetch(`${base}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body)
  }).then(async (r) => ({ status: r.status, body: await r.json() }))

const checkout = await post("/v1/credits/checkout", { order_id: randomUUID() })
if (checkout.status !== 200) fail(`checkout answered ${checkout.status} ${JSON.stringify(checkout.body)}`)
const paid = await fetch(`${base}/sandbox/checkout/${checkout.body.session_id}/pay`, { method: "POST" })
if (paid.status !== 200) fail(`the sandbox checkout's pay answered ${paid.status}`)

const photo = await sharp({ create: { width: 320, height: 240, channels: 3, background: { r: 200, g: 120, b: 40 } } }).jpeg().toBuffer()
const analysis = await post(
  "/v1/analyze",
  { image_base64: photo.toString("base64"), mime_type: "image/jpeg" },
  { "idempotency-key": `node22-${randomUUID()}` }
)
if (analysis.status !== 200 || analysis.body.model !== "sandbox" || analysis.body.items.length === 0) {
  fail(`analyze answered ${analysis.status} ${JSON.stringify(analysis.body)}`)
}
const balance = await fetch(`${base}/v1/credits/balance`, { headers: { authorization: `Bearer ${key}` } }).then((r) => r.json())
if (balance.credits_remaining !== 499) fail(`balance after one analysis is ${JSON.stringify(balance)}, not 499`)
console.log(`ok node22: sandbox sold 500 credits and analysed a photo ("${analysis.body.dish_name}", ${analysis.body.totals.kcal} kcal), balance 499`)
