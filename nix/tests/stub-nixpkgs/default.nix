# A stand-in for nixpkgs when flake.nix is evaluated offline: builders return the attributes they were
# given (so a test can look at them) dressed as derivations; tools are derivations with a name only.
{ system, config ? { } }:
let
  lib = import ./lib.nix;
  storePath = name: "${builtins.storeDir}/00000000000000000000000000000000-${name}";
  derivation' = name: attrs: attrs // {
    type = "derivation";
    inherit name;
    outPath = storePath name;
  };
  tool = name: derivation' name { meta.mainProgram = name; };

  pkgs = {
    inherit lib config;
    stdenv.hostPlatform.system = system;
    callPackage = fn: overrides: (if builtins.isPath fn then import fn else fn) (
      builtins.intersectAttrs (builtins.functionArgs (if builtins.isPath fn then import fn else fn)) pkgs // overrides
    );

    buildNpmPackage =
      fnOrAttrs:
      let
        attrs = if builtins.isFunction fnOrAttrs then fnOrAttrs attrs else fnOrAttrs;
      in
      derivation' "${attrs.pname}-${attrs.version}" attrs;
    importNpmLock = {
      __functor = _: args: derivation' "npm-deps" args;
      npmConfigHook = tool "npm-config-hook";
    };

    writeText = name: text: derivation' name { inherit text; };
    writeShellScript = name: text: derivation' name { inherit text; };
    writeShellApplication = args: derivation' args.name args // { meta.mainProgram = args.name; };
    mkShell = args: derivation' "nix-shell" args;
    testers.runNixOSTest =
      test:
      let
        evaluated = if builtins.isFunction test then test { inherit pkgs; } else test;
      in
      derivation' "vm-test-run-${evaluated.name}" { test = evaluated; };

    nodejs_22 = tool "nodejs-22.23.3" // { meta.mainProgram = "node"; };
    postgresql = tool "postgresql";
    chromium = tool "chromium";
    curl = tool "curl";
    nixfmt = tool "nixfmt";
    pkg-config = tool "pkg-config";
    python3 = tool "python3";
    vips = tool "vips";
    versionCheckHook = tool "version-check-hook";
  };
in
pkgs
