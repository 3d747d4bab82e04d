export declare const SERVE_NODE_OPTIONS: ReadonlyArray<string>
export declare const SERVE_ENV: Readonly<Record<string, string>>
export declare const tuned: () => boolean
