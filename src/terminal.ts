/** What the command line prints for people: tables, plain text when piped, lines that fit the terminal, a progress line. */
import { Console, Effect, Fiber, Schedule } from "effect"

// biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI escape sequences start with ESC.
const ANSI = /\u001b\[[0-9;]*m/g

const colours = (stream: NodeJS.WriteStream) => stream.isTTY === true && !process.env["NO_COLOR"]
const widthOf = (stream: NodeJS.WriteStream) => (stream.isTTY && stream.columns ? stream.columns : 80)

/** Breaks a line longer than `width` at spaces, continuing with the line's own indentation. */
export const wrapLine = (line: string, width: number): Array<string> => {
  const visible = line.replace(ANSI, "")
  if (visible.length <= width) return [line]
  const indent = /^ */.exec(visible)![0]
  const words = visible.trim().split(/ +/)
  const lines: Array<string> = []
  let current = indent
  for (const word of words) {
    if (current.trim().length > 0 && current.length + 1 + word.length > width) {
      lines.push(current)
      current = indent
    }
    current = current.trim().length === 0 ? `${indent}${word}` : `${current} ${word}`
  }
  lines.push(current)
  return lines
}

const shape = (stream: NodeJS.WriteStream, text: string, wrap: boolean) => {
  const plain = colours(stream) ? text : text.replace(ANSI, "")
  return wrap
    ? plain
        .split("\n")
        .flatMap((line) => wrapLine(line, widthOf(stream)))
        .join("\n")
    : plain
}

const print = (stream: NodeJS.WriteStream, wrap: boolean) => (...args: ReadonlyArray<unknown>) =>
  Effect.sync(() => {
    stream.write(`${shape(stream, args.map((a) => (typeof a === "string" ? a : String(a))).join(" "), wrap)}\n`)
  })

/**
 * The Console of the command line: colour only on a terminal (and not with NO_COLOR). Help text (`wrap`) is fitted
 * to the terminal's width, or 80 columns when piped; other output is never wrapped, so JSON stays JSON.
 */
export const withTerminalConsole =
  (wrap: boolean) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.flatMap(Console.consoleWith(Effect.succeed), (base) =>
      Effect.withConsole(effect, {
        ...base,
        log: print(process.stdout, wrap),
        info: print(process.stdout, wrap),
        error: print(process.stderr, wrap)
      })
    )

export interface Column {
  readonly title: string
  readonly align?: "left" | "right"
}

/** A plain text table: a header row, the rows, and an optional footer row under a rule. */
export const table = (
  columns: ReadonlyArray<Column>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  footer?: ReadonlyArray<string>
): string => {
  const all = [columns.map((c) => c.title), ...rows, ...(footer ? [footer] : [])]
  const widths = columns.map((_, i) => Math.max(...all.map((row) => (row[i] ?? "").length)))
  const line = (row: ReadonlyArray<string>) =>
    row
      .map((cell, i) => (columns[i]?.align === "right" ? cell.padStart(widths[i]!) : cell.padEnd(widths[i]!)))
      .join("  ")
      .trimEnd()
  const rule = widths.map((w) => "─".repeat(w)).join("  ")
  return [line(all[0]!), rule, ...rows.map(line), ...(footer ? [rule, line(footer)] : [])].join("\n")
}

const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]

/** A progress line on stderr while `effect` runs, on a terminal only; erased when it ends. */
export const withProgress = (message: string) => <A, E, R>(effect: Effect.Effect<A, E, R>) => {
  if (!process.stderr.isTTY) return effect
  let frame = 0
  const tick = Effect.sync(() => {
    process.stderr.write(`\r${FRAMES[frame++ % FRAMES.length]} ${message}`)
  })
  return Effect.acquireUseRelease(
    Effect.fork(Effect.repeat(tick, Schedule.spaced("100 millis"))),
    () => effect,
    (fiber) => Effect.zipRight(Fiber.interrupt(fiber), Effect.sync(() => process.stderr.write("\r\u001b[2K")))
  )
}
