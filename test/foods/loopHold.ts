/**
 * How long the event loop of this process was held at a stretch, measured while a test runs: a timer ticks every
 * millisecond and each tick notes the wall time and the process's CPU time since the last. The loop's thread computed
 * for at most the lesser of the two: the wall time of a gap also counts the time the process waited for a core (the
 * cores are shared), its CPU time also the compiler's and collector's threads.
 */
export interface LoopHold {
  /** The most time the loop's thread can have computed between two ticks: the lesser of their CPU and wall time, in ms. */
  readonly cpuMs: number
  /** The longest wall time between two ticks, in ms. */
  readonly wallMs: number
}

export const watchLoop = (): { readonly stop: () => LoopHold } => {
  let cpuMs = 0
  let wallMs = 0
  let lastCpu = process.cpuUsage()
  let lastWall = performance.now()
  let timer: NodeJS.Timeout | undefined
  const tick = () => {
    const cpu = process.cpuUsage(lastCpu)
    const wall = performance.now()
    cpuMs = Math.max(cpuMs, Math.min((cpu.user + cpu.system) / 1000, wall - lastWall))
    wallMs = Math.max(wallMs, wall - lastWall)
    lastCpu = process.cpuUsage()
    lastWall = wall
    timer = setTimeout(tick, 1)
  }
  timer = setTimeout(tick, 1)
  return {
    stop: () => {
      clearTimeout(timer)
      tick()
      clearTimeout(timer)
      return { cpuMs, wallMs }
    }
  }
}

/** An input to watch, as two calls of the same make (the second never sent before: a repeat may be answered from memory). */
export interface Make<A> {
  readonly label: string
  readonly calls: readonly [() => Promise<A>, () => Promise<A>]
}

/**
 * The hold of each make, watched alone: both its calls in turn, each answer shown to `check`, the lesser of the two
 * holds kept. The loop watched is the calling process's too, and a collection or a busy core can stretch one call; an
 * input that holds the loop holds it both times.
 */
export const lesserHolds = async <A>(makes: ReadonlyArray<Make<A>>, check: (answer: A, label: string) => void) => {
  const holds: Array<{ readonly label: string; readonly cpuMs: number }> = []
  for (const { calls, label } of makes) {
    let cpuMs = Number.POSITIVE_INFINITY
    for (const call of calls) {
      const watch = watchLoop()
      const answer = await call()
      cpuMs = Math.min(cpuMs, watch.stop().cpuMs)
      check(answer, label)
    }
    holds.push({ label, cpuMs })
  }
  return holds
}
