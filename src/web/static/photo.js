// A photo chosen in the browser, made fit for the service: checked, shrunk to its limits, read as base64.
const MAX_BYTES = 2_000_000
const MAX_SIDE = 2048
const MIN_SIDE = 16

const loadImage = (blob) =>
  new Promise((resolve, reject) => {
    const url = URL.createObjectURL(blob)
    const img = new Image()
    img.onload = () => resolve({ img, url })
    img.onerror = () => { URL.revokeObjectURL(url); reject(new Error("unreadable")) }
    img.src = url
  })

const toBase64 = (blob) =>
  new Promise((resolve) => {
    const reader = new FileReader()
    reader.onload = () => resolve(String(reader.result).split(",", 2)[1])
    reader.readAsDataURL(blob)
  })

const SENT_AS_IS = new Set(["image/jpeg", "image/png"])
const FORMAT_NAMES = { "image/webp": "WebP", "image/heic": "HEIC", "image/heif": "HEIF", "image/avif": "AVIF", "image/gif": "GIF", "image/bmp": "BMP" }

/**
 * Fits a photo into what the service takes (JPEG or PNG, 2 MB, 2048 px a side) by scaling and re-encoding as JPEG;
 * the browser turns it upright as it draws, and a transparent background becomes white.
 */
async function shrink(img) {
  const scale = Math.min(1, MAX_SIDE / Math.max(img.naturalWidth, img.naturalHeight))
  let width = Math.max(MIN_SIDE, Math.round(img.naturalWidth * scale))
  let height = Math.max(MIN_SIDE, Math.round(img.naturalHeight * scale))
  for (let quality = 0.9; ; quality -= 0.1) {
    const canvas = document.createElement("canvas")
    canvas.width = width
    canvas.height = height
    const context = canvas.getContext("2d")
    context.fillStyle = "#ffffff"
    context.fillRect(0, 0, width, height)
    context.drawImage(img, 0, 0, width, height)
    const blob = await new Promise((resolve) => canvas.toBlob(resolve, "image/jpeg", Math.max(quality, 0.5)))
    if (blob && blob.size <= MAX_BYTES) return blob
    if (quality <= 0.5) { width = Math.max(MIN_SIDE, Math.round(width * 0.8)); height = Math.max(MIN_SIDE, Math.round(height * 0.8)) }
  }
}

/**
 * A chosen file as the service takes it: `{ base64, mime, url, note }` (url: a preview, note: its size and whether it
 * was shrunk), or `{ error }` saying in words why it cannot be sent.
 */
export async function preparePhoto(file) {
  const format = FORMAT_NAMES[file.type] ?? (file.type.startsWith("image/") ? file.type.slice(6).toUpperCase() : null)
  let loaded
  try {
    loaded = await loadImage(file)
  } catch {
    return {
      error: format
        ? `This browser cannot read ${format} photos. Choose a JPEG, PNG or WebP photo, or take a new one.`
        : "This file is not a photo this browser can read. Choose a JPEG, PNG or WebP photo, or take a new one."
    }
  }
  const { img, url } = loaded
  if (img.naturalWidth < MIN_SIDE || img.naturalHeight < MIN_SIDE) {
    URL.revokeObjectURL(url)
    return { error: `This image is only ${img.naturalWidth} × ${img.naturalHeight} px; the service needs at least ${MIN_SIDE} px a side.` }
  }
  let blob = file
  let note = `${img.naturalWidth} × ${img.naturalHeight} px, ${(file.size / 1e6).toFixed(2)} MB.`
  if (!SENT_AS_IS.has(file.type)) {
    blob = await shrink(img)
    note += ` Converted${format ? ` from ${format}` : ""} to JPEG, ${(blob.size / 1e6).toFixed(2)} MB.`
  } else if (file.size > MAX_BYTES || img.naturalWidth > MAX_SIDE || img.naturalHeight > MAX_SIDE) {
    blob = await shrink(img)
    note += ` Shrunk to ${(blob.size / 1e6).toFixed(2)} MB to fit the 2 MB limit.`
  }
  return { base64: await toBase64(blob), mime: blob.type === "image/png" ? "image/png" : "image/jpeg", url, note }
}
