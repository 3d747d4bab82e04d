import { describe, expect, it } from "@effect/vitest"
import { Effect, Either, Option } from "effect"
import { AppConfig, AppConfigFromEnv } from "../../src/config.ts"

const operatorOf = (env: Record<string, string>) => Effect.either(Effect.map(Effect.provide(AppConfig, AppConfigFromEnv(env)), (s) => s.operator))

describe("operator settings", () => {
  it.effect("unset by default; a name, a support address or URL, terms and privacy URLs when given", () =>
    Effect.gen(function* () {
      const none = Either.getOrThrow(yield* operatorOf({}))
      expect([none.name, none.supportContact, none.termsUrl, none.privacyUrl].every(Option.isNone)).toBe(true)

      const set = Either.getOrThrow(
        yield* operatorOf({
          OPERATOR_NAME: " Kitchen Lab ",
          SUPPORT_CONTACT: "mailto:help@kitchen-lab.example",
          TERMS_URL: "https://kitchen-lab.example/terms",
          PRIVACY_URL: "https://kitchen-lab.example/privacy"
        })
      )
      expect(set).toEqual({
        name: Option.some("Kitchen Lab"),
        supportContact: Option.some("help@kitchen-lab.example"),
        termsUrl: Option.some("https://kitchen-lab.example/terms"),
        privacyUrl: Option.some("https://kitchen-lab.example/privacy")
      })
      const url = Either.getOrThrow(yield* operatorOf({ SUPPORT_CONTACT: "https://kitchen-lab.example/help" }))
      expect(url.supportContact).toEqual(Option.some("https://kitchen-lab.example/help"))
    }))

  it.effect("a contact that is neither an address nor a URL, or a terms page that is not a URL, names the setting", () =>
    Effect.gen(function* () {
      const contact = yield* operatorOf({ SUPPORT_CONTACT: "call Anna" })
      expect(Either.isLeft(contact) && String(contact.left)).toContain('SUPPORT_CONTACT must be an e-mail address or an http(s) URL, not "call Anna"')
      const terms = yield* operatorOf({ TERMS_URL: "kitchen-lab.example/terms" })
      expect(Either.isLeft(terms) && String(terms.left)).toContain("TERMS_URL must be an http(s) URL")
      const privacy = yield* operatorOf({ PRIVACY_URL: "ftp://kitchen-lab.example/privacy" })
      expect(Either.isLeft(privacy) && String(privacy.left)).toContain("PRIVACY_URL must be an http(s) URL")
    }))
})
