# The morsel service built from this repository with nixpkgs' buildNpmPackage, on Node.js 22 LTS.
{
  lib,
  buildNpmPackage,
  importNpmLock,
  nodejs_22,
  pkg-config,
  python3,
  vips,
  versionCheckHook,
  # Build sharp's native module against nixpkgs' libvips instead of using the prebuilt @img/sharp-*
  # binaries (checked against package-lock.json's integrity hashes like every other dependency).
  # sharp declares the libvips version it was tested with; use this when nixpkgs' vips is at least that.
  withSystemLibvips ? false,
}:
let
  root = ../.;
  packageJson = lib.importJSON ../package.json;

  # npm writes this project's lockfile without `resolved` URLs (omit-lockfile-registry-resolved), while
  # importNpmLock fetches each package from its `resolved` URL and checks it against its `integrity`.
  # Restore the registry URL npm would have recorded. Entries without `integrity` are other platforms'
  # optional packages, which npm skips on this platform.
  registryTarball =
    path: entry:
    let
      name = lib.last (lib.splitString "node_modules/" path);
    in
    "https://registry.npmjs.org/${name}/-/${baseNameOf name}-${entry.version}.tgz";

  lockfile = lib.importJSON ../package-lock.json;
  packageLock = lockfile // {
    packages = lib.mapAttrs (
      path: entry:
      if path != "" && entry ? integrity && !(entry ? resolved) then
        entry // { resolved = registryTarball path entry; }
      else
        entry
    ) lockfile.packages;
  };
in
buildNpmPackage (finalAttrs: {
  pname = "morsel";
  inherit (packageJson) version;

  # Everything but the tests, benchmarks, CI scripts and Nix files, so editing those does not rebuild.
  src = lib.fileset.toSource {
    inherit root;
    fileset = lib.fileset.difference root (
      lib.fileset.unions (
        map lib.fileset.maybeMissing [
          ../.ci
          ../.git
          ../.morsel
          ../bench
          ../dist
          ../flake.lock
          ../flake.nix
          ../nix
          ../node_modules
          ../test
        ]
      )
    );
  };

  nodejs = nodejs_22;

  # No npmDepsHash to maintain: every tarball is fetched on its own and verified against the lockfile.
  npmDeps = importNpmLock {
    package = packageJson;
    inherit packageLock;
  };
  npmConfigHook = importNpmLock.npmConfigHook;

  nativeBuildInputs = lib.optionals withSystemLibvips [
    pkg-config
    python3
  ];
  buildInputs = lib.optionals withSystemLibvips [ vips ];

  # `npm pack` decides what gets installed; without an .npmignore it follows .gitignore, which lists
  # dist/ (the compiled server). An empty .npmignore keeps everything the source filter let through.
  postPatch = ''
    touch .npmignore
  '';

  postConfigure = lib.optionalString withSystemLibvips ''
    rm -r node_modules/@img/sharp-linux-* node_modules/@img/sharp-libvips-*
    (
      cd node_modules/sharp
      SHARP_FORCE_GLOBAL_LIBVIPS=1 NODE_PATH=${finalAttrs.nodejs}/lib/node_modules/npm/node_modules npm run build
      rm -r src/build/Release/obj.target
    )
  '';

  # `npm run build` (tsc and the bundle in dist/bundle, which bin/morsel.js runs) already ran in the build phase;
  # `npm pack` would run it again through `prepare`. The bundle's externals (sharp, PGlite) stay in node_modules.
  npmPackFlags = [ "--ignore-scripts" ];

  doInstallCheck = true;
  nativeInstallCheckInputs = [ versionCheckHook ];
  versionCheckProgramArg = "--version";

  meta = {
    description = "Food-photo nutrition estimates over REST and MCP, paid per call with x402 or with prepaid card credits";
    license = lib.licenses.unfree;
    mainProgram = "morsel";
    # The lockfile holds an x86-64-only development dependency (the EVM simulator used by the tests),
    # which npm refuses to install on other platforms.
    platforms = [ "x86_64-linux" ];
  };
})
