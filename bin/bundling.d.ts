import type { BuildOptions } from "esbuild"

export declare const NODE_BUNDLE: BuildOptions & { readonly external: Array<string> }
