/**
 * A photo as a phone takes it: 4032 × 3024 JPEG of about 5.7 MB, stored sideways with EXIF orientation 6 (turn
 * 90° clockwise to view). Made from a gradient and seeded noise, so every run makes the same bytes.
 */
import sharp from "sharp"

export const PHONE_PHOTO = { width: 4032, height: 3024, orientation: 6 } as const

export const phonePhoto = async (): Promise<Buffer> => {
  const { width, height } = PHONE_PHOTO
  const raw = Buffer.alloc(width * height * 3)
  let seed = 7
  const amplitude = 24
  for (let i = 0; i < raw.length; i += 3) {
    const pixel = i / 3
    const x = pixel % width
    const y = (pixel / width) | 0
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    // Noise keeps the JPEG as large as a camera's; the gradient gives it a picture.
    const noise = ((seed >>> 8) % (2 * amplitude)) - amplitude
    raw[i] = Math.max(0, Math.min(255, ((x * 255) / width + noise) | 0))
    raw[i + 1] = Math.max(0, Math.min(255, ((y * 255) / height + noise) | 0))
    raw[i + 2] = Math.max(0, Math.min(255, 128 + noise))
  }
  return sharp(raw, { raw: { width, height, channels: 3 } }).jpeg({ quality: 93 }).withMetadata({ orientation: PHONE_PHOTO.orientation }).toBuffer()
}
