/**
 * The zero-latency vision model of the service benchmark, run by plain Node: an OpenAI-compatible
 * `POST /v1/chat/completions` that reads the whole request (the photo with it) and answers at once with a meal of one
 * component, or of twenty when the request asks for Lithuanian names (the matcher's cost per item). The service and
 * the floor both send their photos here. Prints `READY <port>` once listening on 127.0.0.1:$PORT.
 */
import { createServer } from "node:http"

const NAMES = [
  "white rice, cooked", "chicken breast, roasted", "broccoli, steamed", "olive oil", "tofu", "whole milk", "cheddar cheese",
  "potatoes, roasted", "salmon, grilled", "scrambled eggs", "greek yogurt", "peanut butter", "bread, whole wheat",
  "banana", "ground beef", "black beans", "apple", "carrots, raw", "oatmeal, cooked", "orange juice"
]
const guess = { kcal: 150, protein_g: 5, carbs_g: 20, fat_g: 5 }
const answer = (count) =>
  JSON.stringify({
    food_detected: true,
    dish_name: "bench plate",
    items: NAMES.slice(0, count).map((name) => ({ name, query: name, estimated_grams: 120, confidence: 0.8, per_100g: guess }))
  })
const completion = (content) =>
  JSON.stringify({
    id: "chatcmpl-bench",
    object: "chat.completion",
    created: 0,
    model: "bench-zero-latency",
    choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, finish_reason: "stop", logprobs: null }],
    usage: { prompt_tokens: 1000, completion_tokens: 100, total_tokens: 1100, prompt_tokens_details: { cached_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0 } }
  })
const one = completion(answer(1))
const twenty = completion(answer(20))
const LITHUANIAN = Buffer.from("Lithuanian")

const server = createServer((request, response) => {
  const chunks = []
  request.on("data", (chunk) => chunks.push(chunk))
  request.on("end", () => {
    const body = Buffer.concat(chunks)
    const text = body.includes(LITHUANIAN) ? twenty : one
    response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text)
  })
})
server.keepAliveTimeout = 60_000
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => process.stdout.write(`READY ${server.address().port}\n`))
