/** SPEC §2.1's image limits, as the client fits a photo to them (the server's own copy is domain/image.ts). */
export const IMAGE_LIMITS = { maxBytes: 2_000_000, minSide: 16, maxSide: 2048 } as const

/** 3_400_000 → "3.4 MB" (decimal megabytes, as the API's 2 MB limit counts them). */
export const megabytes = (bytes: number) => `${(bytes / 1_000_000).toFixed(1)} MB`
