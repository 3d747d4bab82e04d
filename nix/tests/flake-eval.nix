# Offline checks of flake.nix, evaluated against the stand-in nixpkgs of ./stub-nixpkgs: the outputs
# exist, the package is built from the lockfile on Node 22, the app serves, and the flake's own module
# check passes. Yields a line per expectation met.
#   nix-instantiate --eval --strict --json nix/tests/flake-eval.nix
let
  inherit (builtins)
    attrNames
    attrValues
    filter
    fromJSON
    match
    readFile
    ;

  nixpkgs = {
    outPath = ./stub-nixpkgs;
    lib = import ./stub-nixpkgs/lib.nix;
  };
  outputs = (import ../../flake.nix).outputs { inherit self nixpkgs; };
  self = outputs // {
    outPath = ../..;
  };

  system = "x86_64-linux";
  package = self.packages.${system}.default;
  packageJson = fromJSON (readFile ../../package.json);
  lockfile = (fromJSON (readFile ../../package-lock.json)).packages;
  locked = package.npmDeps.packageLock.packages;
  withIntegrity = filter (path: path != "" && lockfile.${path} ? integrity) (attrNames lockfile);
  resolved = filter (path: locked.${path} ? resolved) (attrNames locked);
  registryUrl =
    name: basename: "https://registry.npmjs.org/${name}/-/${basename}-${lockfile."node_modules/${name}".version}.tgz";

  app = self.apps.${system}.default;
  shell = self.devShells.${system}.default;
  checks = self.checks.${system};
  withSystemLibvips = (import ./stub-nixpkgs { inherit system; }).callPackage ../package.nix {
    withSystemLibvips = true;
  };
  flakeModuleArgs = {
    lib = nixpkgs.lib;
    pkgs.stdenv.hostPlatform.system = system;
  };
  flakeModule = self.nixosModules.default flakeModuleArgs;

  expect =
    label: actual: expected:
    if actual == expected then
      "ok flake: ${label}"
    else
      throw "flake: ${label}: expected ${builtins.toJSON expected}, got ${builtins.toJSON actual}";
in
[
  (expect "outputs for x86_64-linux" (map attrNames [
    self.packages
    self.apps
    self.devShells
    self.checks
  ]) [ [ system ] [ system ] [ system ] [ system ] ])
  (expect "the package is named and versioned from package.json" package.name "morsel-${packageJson.version}")
  (expect "the package runs on Node.js 22" package.nodejs.name "nodejs-22.23.3")
  (expect "dependencies come from package-lock.json through importNpmLock"
    {
      hook = package.npmConfigHook.name;
      package = package.npmDeps.package.name;
    }
    {
      hook = "npm-config-hook";
      package = "morsel";
    }
  )
  (expect "every locked package with an integrity hash gets a registry URL" resolved withIntegrity)
  (expect "registry URLs of plain and scoped packages"
    [
      locked."node_modules/effect".resolved
      locked."node_modules/@effect/cli".resolved
    ]
    [
      (registryUrl "effect" "effect")
      (registryUrl "@effect/cli" "cli")
    ]
  )
  (expect "registry URLs name the locked version" (filter (
    path: match "https://registry\\.npmjs\\.org/.*/-/.*-${locked.${path}.version}\\.tgz" locked.${path}.resolved == null
  ) resolved) [ ])
  (expect "npm pack keeps dist/ despite .gitignore" package.postPatch "touch .npmignore\n")
  (expect "sharp's prebuilt binaries by default, nixpkgs' libvips on request"
    {
      default = map (p: p.name) (package.nativeBuildInputs ++ package.buildInputs);
      withSystemLibvips = map (p: p.name) (withSystemLibvips.nativeBuildInputs ++ withSystemLibvips.buildInputs);
      forced = match ".*SHARP_FORCE_GLOBAL_LIBVIPS=1 .*npm run build.*" withSystemLibvips.postConfigure != null;
    }
    {
      default = [ ];
      withSystemLibvips = [
        "pkg-config"
        "python3"
        "vips"
      ];
      forced = true;
    }
  )
  (expect "the bin is morsel and its version is checked" {
    inherit (package.meta) mainProgram;
    inherit (package) doInstallCheck versionCheckProgramArg;
  } {
    mainProgram = "morsel";
    doInstallCheck = true;
    versionCheckProgramArg = "--version";
  })
  (expect "the app is the morsel-serve script" {
    inherit (app) type;
    program = match ".*-(morsel-serve)" app.program;
  } {
    type = "app";
    program = [ "morsel-serve" ];
  })
  (expect "the dev shell has Node 22, PostgreSQL, Chromium and a test server helper" (map (p: p.name) shell.packages) [
    "nodejs-22.23.3"
    "postgresql"
    "chromium"
    "curl"
    "morsel-test-postgres"
  ])
  (expect "the flake's module check runs every module case" checks.module-eval.text (
    nixpkgs.lib.concatLines (builtins.concatLists (attrValues (import ./module-eval.nix).cases))
  ))
  (expect "the flake's module imports nix/module.nix and defaults to the flake's package" {
    inherit (flakeModule) imports;
    package = flakeModule.services.morsel.package.content == package;
  } {
    imports = [ ../module.nix ];
    package = true;
  })
  (expect "the VM test runs the flake's module" (map (m: (m flakeModuleArgs).imports) checks.nixos.test.nodes.machine.imports) [ [ ../module.nix ] ])
]
