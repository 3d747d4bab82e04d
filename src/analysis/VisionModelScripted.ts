/** The scripted vision model: the same image always shows the same realistic meal, and tests can queue exact answers or failures. */
import { createHash } from "node:crypto"
import { Context, Effect, Layer, Ref } from "effect"
import { type ModelAnswer, type VisionInput, VisionFailure, VisionModel } from "./VisionModel.ts"

/** Reported in each result's `model`. */
export const SCRIPTED_MODEL = "sandbox"

type Words = { readonly en: string; readonly lt: string }
type Per100 = readonly [kcal: number, protein: number, carbs: number, fat: number]

/** One component: its names, the English food-database query, its weight on the plate and its per-100 g estimate. */
interface Component {
  readonly name: Words
  readonly query: string
  readonly grams: number
  readonly per100: Per100
}

export interface SandboxMeal {
  readonly dish: Words
  readonly items: ReadonlyArray<Component>
}

const c = (en: string, lt: string, query: string, grams: number, per100: Per100): Component => ({ name: { en, lt }, query, grams, per100 })

const TOMATO: Per100 = [18, 0.9, 3.9, 0.2]
const LETTUCE: Per100 = [15, 1.4, 2.9, 0.2]

/** Everyday plates whose queries the shipped USDA subset answers, so sandbox results come back `usda`. */
export const SANDBOX_MEALS: ReadonlyArray<SandboxMeal> = [
  {
    dish: { en: "Grilled chicken with rice and broccoli", lt: "Kepta vištiena su ryžiais ir brokoliais" },
    items: [
      c("Grilled chicken breast", "Kepta vištienos krūtinėlė", "grilled chicken breast", 150, [151, 30.5, 0, 3.2]),
      c("White rice", "Balti ryžiai", "white rice", 180, [130, 2.7, 28.2, 0.3]),
      c("Steamed broccoli", "Garinti brokoliai", "steamed broccoli", 90, [35, 2.4, 7.2, 0.4])
    ]
  },
  {
    dish: { en: "Scrambled eggs with bacon and toast", lt: "Kiaušinienė su šonine ir skrebučiu" },
    items: [
      c("Scrambled eggs", "Plakta kiaušinienė", "scrambled eggs", 120, [149, 10, 1.6, 11]),
      c("Bacon", "Šoninė", "bacon", 30, [541, 37, 1.4, 41.8]),
      c("Toast", "Skrebutis", "toast", 60, [290, 9, 53.4, 4]),
      c("Butter", "Sviestas", "butter", 10, [717, 0.9, 0.1, 81.1])
    ]
  },
  {
    dish: { en: "Baked salmon with potato and green beans", lt: "Kepta lašiša su bulve ir šparaginėmis pupelėmis" },
    items: [
      c("Baked salmon", "Kepta lašiša", "baked salmon", 140, [206, 22.1, 0, 12.4]),
      c("Baked potato", "Kepta bulvė", "baked potato", 200, [93, 2.5, 21.2, 0.1]),
      c("Green beans", "Šparaginės pupelės", "green beans", 80, [35, 1.9, 7.9, 0.3])
    ]
  },
  {
    dish: { en: "Spaghetti with meat sauce", lt: "Spagečiai su mėsos padažu" },
    items: [
      c("Spaghetti", "Spagečiai", "spaghetti", 220, [158, 5.8, 30.9, 0.9]),
      c("Ground beef", "Malta jautiena", "ground beef", 90, [250, 25.9, 0, 15.5]),
      c("Tomato", "Pomidorai", "tomato", 80, TOMATO),
      c("Parmesan cheese", "Parmezano sūris", "parmesan cheese", 12, [420, 28.4, 13.9, 27.8])
    ]
  },
  {
    dish: { en: "Greek yogurt with granola and blueberries", lt: "Graikiškas jogurtas su granola ir mėlynėmis" },
    items: [
      c("Greek yogurt", "Graikiškas jogurtas", "greek yogurt", 170, [59, 10.2, 3.6, 0.4]),
      c("Granola", "Granola", "granola", 40, [489, 13.7, 53.9, 24.3]),
      c("Blueberries", "Mėlynės", "blueberries", 60, [57, 0.7, 14.5, 0.3]),
      c("Honey", "Medus", "honey", 15, [304, 0.3, 82.4, 0])
    ]
  },
  {
    dish: { en: "Garden salad with feta", lt: "Daržovių salotos su fetos sūriu" },
    items: [
      c("Lettuce", "Salotų lapai", "lettuce", 80, LETTUCE),
      c("Cucumber", "Agurkas", "cucumber", 60, [15, 0.7, 3.6, 0.1]),
      c("Tomato", "Pomidorai", "tomato", 70, TOMATO),
      c("Feta cheese", "Fetos sūris", "feta cheese", 30, [264, 14.2, 4.1, 21.3]),
      c("Olive oil", "Alyvuogių aliejus", "olive oil", 12, [884, 0, 0, 100])
    ]
  },
  {
    dish: { en: "Steak with mashed potatoes and corn", lt: "Jautienos kepsnys su bulvių koše ir kukurūzais" },
    items: [
      c("Sirloin steak", "Jautienos kepsnys", "sirloin steak", 200, [212, 29.3, 0, 9.6]),
      c("Mashed potatoes", "Bulvių košė", "mashed potatoes", 180, [113, 1.9, 16.9, 4.2]),
      c("Sweet corn", "Kukurūzai", "sweet corn", 80, [96, 3.4, 21, 1.5])
    ]
  },
  {
    dish: { en: "Rice and black bean bowl", lt: "Ryžių ir juodųjų pupelių dubenėlis" },
    items: [
      c("Brown rice", "Rudieji ryžiai", "brown rice", 150, [123, 2.7, 25.6, 1]),
      c("Black beans", "Juodosios pupelės", "black beans", 120, [132, 8.9, 23.7, 0.5]),
      c("Avocado", "Avokadas", "avocado", 60, [160, 2, 8.5, 14.7]),
      c("Salsa", "Salsos padažas", "salsa", 50, [29, 1.5, 6.6, 0.2])
    ]
  },
  {
    dish: { en: "Apple with peanut butter, almonds and grapes", lt: "Obuolys su žemės riešutų sviestu, migdolais ir vynuogėmis" },
    items: [
      c("Apple", "Obuolys", "apple", 150, [52, 0.3, 13.8, 0.2]),
      c("Peanut butter", "Žemės riešutų sviestas", "peanut butter", 32, [598, 22.2, 22.3, 51.4]),
      c("Almonds", "Migdolai", "almonds", 28, [579, 21.2, 21.6, 49.9]),
      c("Grapes", "Vynuogės", "grapes", 80, [69, 0.7, 18.1, 0.2])
    ]
  },
  {
    dish: { en: "Roast turkey with potatoes, carrots and peas", lt: "Kepta kalakutiena su bulvėmis, morkomis ir žirneliais" },
    items: [
      c("Roast turkey", "Kepta kalakutiena", "roast turkey", 150, [159, 28.6, 0, 4.5]),
      c("Boiled potatoes", "Virtos bulvės", "boiled potatoes", 150, [86, 1.7, 20, 0.1]),
      c("Boiled carrots", "Virtos morkos", "boiled carrots", 80, [35, 0.8, 8.2, 0.2]),
      c("Green peas", "Žalieji žirneliai", "green peas", 60, [84, 5.4, 15.6, 0.2])
    ]
  },
  {
    dish: { en: "Tuna sandwich", lt: "Sumuštinis su tunu" },
    items: [
      c("Tuna", "Tunas", "canned tuna", 80, [86, 19.4, 0, 1]),
      c("Mayonnaise", "Majonezas", "mayonnaise", 15, [680, 1, 0.6, 74.9]),
      c("Whole wheat bread", "Viso grūdo duona", "whole wheat bread", 70, [252, 12.5, 42.7, 3.5]),
      c("Lettuce", "Salotų lapai", "lettuce", 15, LETTUCE)
    ]
  },
  {
    dish: { en: "Oatmeal with banana and milk", lt: "Avižinė košė su bananu ir pienu" },
    items: [
      c("Oatmeal", "Avižinė košė", "oatmeal", 250, [71, 2.5, 12, 1.5]),
      c("Banana", "Bananas", "banana", 100, [89, 1.1, 22.8, 0.3]),
      c("Whole milk", "Pienas", "whole milk", 100, [61, 3.2, 4.8, 3.3])
    ]
  }
]

/** The meal an image shows: picked by the image's SHA-256, so the same bytes always give the same meal. */
export const mealOf = (image: Uint8Array): SandboxMeal =>
  SANDBOX_MEALS[createHash("sha256").update(image).digest().readUInt32BE(0) % SANDBOX_MEALS.length]!

/** The deterministic answer for an image, in the requested language. */
export const answerFor = (input: VisionInput): ModelAnswer => {
  const meal = mealOf(input.image)
  return {
    food_detected: true,
    dish_name: meal.dish[input.language],
    items: meal.items.map((item, i) => ({
      name: item.name[input.language],
      query: item.query,
      estimated_grams: item.grams,
      // The main component is the most certain, as a real model reports it.
      confidence: Math.max(0.5, 0.9 - i * 0.1),
      per_100g: { kcal: item.per100[0], protein_g: item.per100[1], carbs_g: item.per100[2], fat_g: item.per100[3] }
    }))
  }
}

/** The answer of a model that sees no food (the analysis answers 422 no_food_detected). */
export const NO_FOOD: ModelAnswer = { food_detected: false, dish_name: "", items: [] }

/** What the scripted model does for one call instead of the image's meal. */
export type ScriptStep =
  | { readonly _tag: "Answer"; readonly answer: ModelAnswer }
  | { readonly _tag: "Fail"; readonly failure: VisionFailure }
  /** Never answers: the analysis deadline decides (504). */
  | { readonly _tag: "Hang" }

export const ScriptStep = {
  answer: (answer: ModelAnswer): ScriptStep => ({ _tag: "Answer", answer }),
  noFood: (): ScriptStep => ({ _tag: "Answer", answer: NO_FOOD }),
  fail: (reason: VisionFailure["reason"], message = `scripted ${reason}`): ScriptStep => ({
    _tag: "Fail",
    failure: new VisionFailure({ reason, message })
  }),
  hang: (): ScriptStep => ({ _tag: "Hang" })
} as const

/** The controls of the scripted model. */
export class VisionScript extends Context.Tag("morsel/VisionScript")<
  VisionScript,
  {
    /** The next calls take these steps in order; once they are used up, images get their meals again. */
    readonly enqueue: (...steps: ReadonlyArray<ScriptStep>) => Effect.Effect<void>
    /** Every input the model was called with, oldest first. */
    readonly calls: Effect.Effect<ReadonlyArray<VisionInput>>
  }
>() {}

const perform = (step: ScriptStep): Effect.Effect<ModelAnswer, VisionFailure> => {
  switch (step._tag) {
    case "Answer":
      return Effect.succeed(step.answer)
    case "Fail":
      return Effect.fail(step.failure)
    case "Hang":
      return Effect.never
  }
}

/** The scripted model and its controls; with nothing queued it is the deterministic sandbox model. */
export const VisionModelScripted: Layer.Layer<VisionModel | VisionScript> = Layer.effectContext(
  Effect.gen(function* () {
    const queue = yield* Ref.make<ReadonlyArray<ScriptStep>>([])
    const seen = yield* Ref.make<ReadonlyArray<VisionInput>>([])
    const analyze = (input: VisionInput) =>
      Ref.update(seen, (calls) => [...calls, input]).pipe(
        Effect.zipRight(Ref.modify(queue, ([next, ...rest]) => [next, rest])),
        Effect.flatMap((step) => (step === undefined ? Effect.succeed(answerFor(input)) : perform(step)))
      )
    return Context.make(VisionModel, { model: SCRIPTED_MODEL, analyze }).pipe(
      Context.add(VisionScript, {
        enqueue: (...steps) => Ref.update(queue, (queued) => [...queued, ...steps]),
        calls: Ref.get(seen)
      })
    )
  })
)
