/**
 * Short help and usage errors of the `morsel` command line, read from the commands' own declarations: how a command
 * is typed, what each option takes, and the nearest command or option when one is mistyped.
 */
import { CliConfig, CommandDescriptor, type HelpDoc, type Span } from "@effect/cli"
import { Option } from "effect"

type Descriptor = CommandDescriptor.Command<unknown>

/** One line of a command's help: `--grams float` and what it is for. */
interface Entry {
  readonly term: string
  readonly description: string
}

interface Sections {
  readonly description: string
  readonly arguments: ReadonlyArray<Entry>
  readonly options: ReadonlyArray<Entry>
}

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    default:
      return spanText(span.value)
  }
}

// What @effect/cli says of every option of a kind ("A floating point number.", "This setting is optional."): not ours.
const FILLER =
  /^(A user-defined piece of text|A floating point number|An integer|A true or false value|A boolean|An existing |A file|A directory|A path|One of the following|This setting|A date)/

const paragraphs = (doc: HelpDoc.HelpDoc): Array<string> => {
  switch (doc._tag) {
    case "Paragraph":
      return [spanText(doc.value)]
    case "Sequence":
      return [...paragraphs(doc.left), ...paragraphs(doc.right)]
    case "Enumeration":
      return doc.elements.flatMap(paragraphs)
    default:
      return []
  }
}

/** The DESCRIPTION, ARGUMENTS and OPTIONS of @effect/cli's help, without its filler. */
const sectionsOf = (command: Descriptor): Sections => {
  const found: { description: Array<string>; arguments: Array<Entry>; options: Array<Entry> } = { description: [], arguments: [], options: [] }
  let section = ""
  const walk = (doc: HelpDoc.HelpDoc): void => {
    switch (doc._tag) {
      case "Header":
        section = spanText(doc.value)
        return
      case "Sequence":
        walk(doc.left)
        walk(doc.right)
        return
      case "Paragraph":
        if (section === "DESCRIPTION") found.description.push(spanText(doc.value))
        return
      case "DescriptionList": {
        const target = section === "ARGUMENTS" ? found.arguments : section === "OPTIONS" ? found.options : undefined
        for (const [term, detail] of doc.definitions) {
          target?.push({ term: spanText(term), description: paragraphs(detail).filter((line) => !FILLER.test(line)).join(" ") })
        }
        return
      }
      default:
        return
    }
  }
  walk(CommandDescriptor.getHelp(command, CliConfig.defaultConfig))
  return { description: found.description.join(" "), arguments: found.arguments, options: found.options }
}

const isDescriptor = (value: unknown): value is Descriptor => typeof value === "object" && value !== null && CommandDescriptor.TypeId in value

/** The commands directly under `command` (@effect/cli keeps them as `children` of a command with subcommands). */
const subcommandsOf = (command: Descriptor): Array<readonly [string, Descriptor]> => {
  let node: Descriptor = command
  while ("command" in node && isDescriptor(node.command)) node = node.command
  if (!("children" in node) || !Array.isArray(node.children)) return []
  return node.children.filter(isDescriptor).flatMap((child) => Array.from(CommandDescriptor.getNames(child), (name) => [name, child] as const))
}

/** Edit distance, for "did you mean". */
const distance = (a: string, b: string) => {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
    previous = current
  }
  return previous[b.length]!
}

/** The nearest of `names` to a mistyped `word`, when one is near enough to be what was meant. */
export const nearest = (word: string, names: ReadonlyArray<string>): Option.Option<string> => {
  const ranked = names.map((name) => [name, distance(word, name)] as const).sort((a, b) => a[1] - b[1])
  const best = ranked[0]
  return best !== undefined && best[1] <= Math.max(2, Math.floor(word.length / 3)) ? Option.some(best[0]) : Option.none()
}

// Options every command takes, handled by the command line itself.
const GLOBAL_OPTIONS: ReadonlyArray<Entry> = [
  { term: "--verbose", description: "the whole cause of a failure, not only its line" },
  { term: "--help", description: "this help" }
]
const BUILT_IN = new Set(["--help", "-h", "--verbose", "--version", "--wizard", "--completions", "--log-level"])

// How a value is shown in help: `--grams <number>`, `--key <secret>`, `--language en|lt`.
const VALUE_NAMES: Readonly<Record<string, string>> = { float: "<number>", integer: "<whole number>", text: "<text>", redacted: "<secret>" }
const shown = (term: string) => {
  const [name, ...value] = term.split(" ")
  const accepts = value.join(" ")
  return accepts === "" ? term : `${name} ${VALUE_NAMES[accepts] ?? accepts.replaceAll(" | ", "|")}`
}

/** Words in lines of at most `width` characters. */
const wrap = (text: string, width: number): Array<string> => {
  const lines: Array<string> = []
  for (const word of text.split(" ")) {
    const last = lines.at(-1)
    if (last !== undefined && last.length + 1 + word.length <= width) lines[lines.length - 1] = `${last} ${word}`
    else lines.push(word)
  }
  return lines
}

/** Terms and descriptions in two columns within `width`; a description too long for its line goes on under itself. */
const columns = (entries: ReadonlyArray<Entry>, width: number) => {
  const terms = entries.map((entry) => shown(entry.term))
  const column = Math.max(...terms.map((term) => term.length))
  const indent = " ".repeat(column + 4)
  return entries.flatMap((entry, i) => {
    const [first = "", ...more] = wrap(entry.description, Math.max(24, width - indent.length))
    return [`  ${terms[i]!.padEnd(column)}  ${first}`.trimEnd(), ...more.map((line) => `${indent}${line}`)]
  })
}

/** The help of `morsel <path>`: what it does, how it is typed, its commands or options, one line each. */
export const shortHelp = (path: ReadonlyArray<string>, command: Descriptor, width = 80): string => {
  const name = path.join(" ")
  const sections = sectionsOf(command)
  const subcommands = subcommandsOf(command)
  const title = sections.description === "" ? name : `${name}: ${sections.description}`
  if (subcommands.length > 0) {
    const entries = subcommands.map(([sub, descriptor]) => ({ term: sub, description: sectionsOf(descriptor).description }))
    return [title, "", `Usage: ${name} <command> [options]`, "", "Commands:", ...columns(entries, width), "", `${name} <command> --help shows how each is typed.`].join("\n")
  }
  const args = sections.arguments.map((entry) => entry.term).join(" ")
  return [
    title,
    "",
    `Usage: ${name}${args === "" ? "" : ` ${args}`}${sections.options.length > 0 ? " [options]" : ""}`,
    "",
    ...(sections.arguments.length > 0 ? [...columns(sections.arguments, width), ""] : []),
    "Options:",
    ...columns([...sections.options.filter((entry) => !BUILT_IN.has(entry.term.split(" ")[0]!) && !entry.term.startsWith("(")), ...GLOBAL_OPTIONS], width)
  ].join("\n")
}

const helpWidth = () => (process.stdout.isTTY && process.stdout.columns ? process.stdout.columns : 80)

/** What the arguments ask for before the command runs: help, a usage error, or to run. */
export type Usage =
  | { readonly _tag: "Help"; readonly text: string }
  | { readonly _tag: "UsageError"; readonly message: string }
  | { readonly _tag: "Run" }

const usageError = (message: string): Usage => ({ _tag: "UsageError", message })

/** Reads the command's words and options against the declarations; `args` are the words after `morsel`. */
export const readUsage = (root: Descriptor, args: ReadonlyArray<string>): Usage => {
  const path = ["morsel"]
  let command = root
  let index = 0
  for (; index < args.length; index++) {
    const word = args[index]!
    if (word.startsWith("-")) break
    const subcommands = subcommandsOf(command)
    if (subcommands.length === 0) break
    const next = subcommands.find(([name]) => name === word)
    if (next === undefined) {
      const names = subcommands.map(([name]) => name)
      const guess = Option.match(nearest(word, names), { onNone: () => "", onSome: (name) => `; did you mean ${path.join(" ")} ${name}?` })
      return usageError(`${path.join(" ")} has no command "${word}"${guess} (commands: ${names.join(", ")})`)
    }
    path.push(word)
    command = next[1]
  }
  const rest = args.slice(index)
  if (rest.includes("--help") || rest.includes("-h") || subcommandsOf(command).length > 0) {
    return { _tag: "Help", text: shortHelp(path, command, helpWidth()) }
  }
  const options = sectionsOf(command).options
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i]!
    if (!arg.startsWith("--")) continue
    const [name, inline] = arg.includes("=") ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)] : [arg, undefined]
    if (BUILT_IN.has(name)) continue
    const declared = options.find((entry) => entry.term.split(" ")[0] === name)
    if (declared === undefined) {
      const names = options.map((entry) => entry.term.split(" ")[0]!)
      const guess = Option.match(nearest(name, names), { onNone: () => "", onSome: (near) => `; did you mean ${near}?` })
      return usageError(`${path.join(" ")} has no option ${name}${guess} (see ${path.join(" ")} --help)`)
    }
    const accepts = declared.term.slice(name.length + 1)
    if (accepts === "") continue
    const value = inline ?? rest[i + 1]
    if (inline === undefined) i++
    const problem = checkValue(name, accepts, value)
    if (problem !== undefined) return usageError(problem)
  }
  return { _tag: "Run" }
}

/** Why `value` does not fit what `--name` accepts (`float`, `integer`, `en | lt`, `text`), in words naming the option. */
const checkValue = (name: string, accepts: string, value: string | undefined): string | undefined => {
  if (value === undefined || (value.startsWith("--") && accepts !== "text")) return `${name} needs a value (${describeAccepts(accepts)})`
  if (accepts === "float" && !Number.isFinite(Number(value.trim()))) return `${name} takes a number, not "${value}"`
  if (accepts === "integer" && !/^-?\d+$/.test(value.trim())) return `${name} takes a whole number, not "${value}"`
  if (accepts.includes(" | ") && !accepts.split(" | ").includes(value)) return `${name} takes ${describeAccepts(accepts)}, not "${value}"`
  return undefined
}

const describeAccepts = (accepts: string) => {
  if (accepts === "float") return "a number"
  if (accepts === "integer") return "a whole number"
  const choices = accepts.split(" | ")
  return choices.length > 1 ? `${choices.slice(0, -1).join(", ")} or ${choices.at(-1)}` : accepts
}
