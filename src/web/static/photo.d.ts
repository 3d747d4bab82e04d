/** Types of the page's photo preparation (photo.js), which the browser build of `morsel/client` uses as it is. */
export type PreparedPagePhoto =
  | { readonly base64: string; readonly mime: "image/jpeg" | "image/png"; readonly url: string; readonly note: string; readonly error?: undefined }
  | { readonly error: string }

/** A chosen file as the service takes it, or `{ error }` saying in words why it cannot be sent. */
export function preparePhoto(file: Blob): Promise<PreparedPagePhoto>
