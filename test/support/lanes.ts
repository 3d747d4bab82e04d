/** For tests of a lane (an answer given before the HttpApi stack): its count, and its answer held to the stack's. */
import { Effect, Metric, MetricLabel } from "effect"
import { expect } from "vitest"
import { fastLaneAnswers } from "../../src/observability/metrics.ts"
import type { Answer } from "./http.ts"

/** How many answers of this kind (`challenge`, `replay`, `nutrition`) the lanes gave in this process so far. */
export const laneAnswers = (answer: string) =>
  Effect.map(Metric.value(Metric.taggedWithLabels(fastLaneAnswers, [MetricLabel.make("answer", answer)])), (state) => state.count)

/** Headers that say the same thing on both servers (the date and connection handling are each answer's own). */
const comparable = (answer: Answer) =>
  Object.fromEntries([...answer.headers].filter(([name]) => !["date", "connection", "keep-alive"].includes(name)))

/** The same status, body and headers from the instance with the lane as from the one without it. */
export const expectSameAnswer = (lane: Answer, stack: Answer) => {
  expect(lane.status).toBe(stack.status)
  expect(lane.text).toBe(stack.text)
  expect(comparable(lane)).toEqual(comparable(stack))
}
