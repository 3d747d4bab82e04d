{
  description = "morsel: food-photo nutrition estimates over REST and MCP, paid per call with x402 or with card credits";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-26.05";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;

      # The lockfile holds an x86-64-only development dependency, so the package builds there only.
      systems = [ "x86_64-linux" ];

      pkgsFor =
        system:
        import nixpkgs {
          inherit system;
          # package.json says UNLICENSED: allow this one unfree package, nothing else.
          config.allowUnfreePredicate = pkg: lib.getName pkg == "morsel";
        };

      forAllSystems = f: lib.genAttrs systems (system: f (pkgsFor system));
    in
    {
      packages = forAllSystems (pkgs: rec {
        morsel = pkgs.callPackage ./nix/package.nix { };
        default = morsel;
      });

      overlays.default = final: _prev: { morsel = final.callPackage ./nix/package.nix { }; };

      apps = forAllSystems (pkgs: {
        default = {
          type = "app";
          program = toString (
            pkgs.writeShellScript "morsel-serve" ''
              exec ${lib.getExe self.packages.${pkgs.stdenv.hostPlatform.system}.default} serve "$@"
            ''
          );
          meta.description = "Serve morsel on http://127.0.0.1:8787 with the embedded database in ./.morsel";
        };
      });

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          packages = [
            pkgs.nodejs_22
            pkgs.postgresql
            pkgs.chromium
            pkgs.curl
            # A PostgreSQL server in ./.morsel/postgres for the tests that need one:
            #   export $(morsel-test-postgres) && npm test
            (pkgs.writeShellApplication {
              name = "morsel-test-postgres";
              runtimeInputs = [ pkgs.postgresql ];
              text = ''
                dir="''${MORSEL_TEST_PGDATA:-$PWD/.morsel/postgres}"
                [ -f "$dir/PG_VERSION" ] || initdb --pgdata="$dir" --username=postgres --auth=trust >/dev/null
                pg_ctl status --pgdata="$dir" >/dev/null ||
                  pg_ctl start --pgdata="$dir" --wait --log="$dir/server.log" \
                    --options="-c listen_addresses=127.0.0.1 -c port=5432 -c unix_socket_directories=$dir" >/dev/null
                createdb --host=127.0.0.1 --username=postgres test 2>/dev/null || true
                echo "TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test"
              '';
            })
          ];
          # The browser tests drive this Chromium (Debian puts it at /usr/bin/chromium).
          CHROMIUM_PATH = lib.getExe pkgs.chromium;
        };
      });

      nixosModules.default =
        { lib, pkgs, ... }:
        {
          imports = [ ./nix/module.nix ];
          services.morsel.package = lib.mkDefault self.packages.${pkgs.stdenv.hostPlatform.system}.default;
        };

      checks = forAllSystems (
        pkgs:
        let
          moduleTests = import ./nix/tests/module-eval.nix;
          refusedAccepted = lib.filterAttrs (
            _: system: (builtins.tryEval (builtins.deepSeq system system)).success
          ) moduleTests.refused;
        in
        {
          package = self.packages.${pkgs.stdenv.hostPlatform.system}.default;

          # The offline module checks of .ci/nix, forced at evaluation time.
          module-eval =
            assert lib.assertMsg (refusedAccepted == { })
              "nix/tests/module-eval.nix: the module accepted ${toString (lib.attrNames refusedAccepted)}";
            pkgs.writeText "morsel-module-eval" (
              lib.concatLines (lib.flatten (lib.attrValues moduleTests.cases))
            );

          # A NixOS machine running the module with a local PostgreSQL and a secret from a file.
          nixos = pkgs.testers.runNixOSTest (import ./nix/tests/vm.nix { inherit self; });
        }
      );

      formatter = forAllSystems (pkgs: pkgs.nixfmt);
    };
}
