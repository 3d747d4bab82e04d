/** The benchmark's morsel role as one entry, bundled with esbuild the way the shipped command line is bundled. */
import { morsel } from "./morsel.ts"

await morsel()
