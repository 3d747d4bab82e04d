/** Real photos-to-be for tests: small JPEG and PNG images made with sharp. */
import sharp from "sharp"

export const makeImage = async (width: number, height: number, format: "jpeg" | "png" = "jpeg") => {
  const pixels = sharp({ create: { width, height, channels: 3, background: { r: 200, g: 120, b: 40 } } })
  const bytes = await (format === "jpeg" ? pixels.jpeg({ quality: 80 }) : pixels.png()).toBuffer()
  return { bytes, base64: bytes.toString("base64"), mime: format === "jpeg" ? ("image/jpeg" as const) : ("image/png" as const) }
}
