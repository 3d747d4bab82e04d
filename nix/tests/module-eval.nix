# Offline checks of the NixOS module: each attribute of `cases` evaluates the module for one configuration
# and yields a line per expectation met (a failed one stops evaluation with expected and actual values);
# each attribute of `refused` is a configuration the module must reject.
#   nix-instantiate --eval --strict --json nix/tests/module-eval.nix -A cases.production
let
  evalModule = import ./eval-module.nix;

  package = {
    type = "derivation";
    name = "morsel-0.1.0";
    outPath = "/nix/store/0000000000000000000000000000000a-morsel-0.1.0";
    meta.mainProgram = "morsel";
  };
  morsel = "${package}/bin/morsel";

  eval =
    definitions:
    (evalModule {
      module = ../module.nix;
      definitions.services.morsel = {
        enable = true;
        inherit package;
      } // definitions;
    }).system;

  expect =
    label: actual: expected:
    if actual == expected then
      "ok ${label}"
    else
      throw "${label}: expected ${builtins.toJSON expected}, got ${builtins.toJSON actual}";

  secrets = {
    OPENAI_API_KEY = "/run/secrets/morsel/openai";
    STRIPE_SECRET_KEY = "/run/secrets/morsel/stripe";
    STRIPE_WEBHOOK_SECRET = "/run/secrets/morsel/stripe-webhook";
    ADMIN_TOKEN = "/run/secrets/morsel/admin";
  };

  production = eval {
    settings = {
      HOST = "0.0.0.0";
      PUBLIC_BASE_URL = "https://morsel.example.com";
      VISION_MODEL = "gpt-5-mini";
      LIMIT_GLOBAL_PER_DAY = 500;
      TRUSTED_ORIGINS = [
        "https://app.example.com"
        "https://www.example.com"
      ];
      X402_PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
      OPERATOR_NAME = "Kitchen Lab";
      SUPPORT_CONTACT = "help@kitchen-lab.example";
    };
    secretFiles = secrets;
    openFirewall = true;
    foodData = "/var/lib/usda/sr28";
  };
  server = production.systemd.services.morsel;
  importer = production.systemd.services.morsel-fooddb-import;

  minimal = eval { };

  embedded = eval {
    database.createLocally = false;
    settings.HOST = "0.0.0.0";
  };

  external = eval {
    database.createLocally = false;
    secretFiles.DATABASE_URL = "/run/secrets/morsel/database-url";
  };

  socket = eval {
    database.createLocally = false;
    settings.DATABASE_URL = "postgresql://morsel@/morsel?host=/run/postgresql";
  };
in
{
  cases = {
    production = [
      (expect "production: settings become the environment, secrets stay out" server.environment {
        HOST = "0.0.0.0";
        PORT = "8787";
        PUBLIC_BASE_URL = "https://morsel.example.com";
        VISION_MODEL = "gpt-5-mini";
        LIMIT_GLOBAL_PER_DAY = "500";
        TRUSTED_ORIGINS = "https://app.example.com,https://www.example.com";
        X402_PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
        OPERATOR_NAME = "Kitchen Lab";
        SUPPORT_CONTACT = "help@kitchen-lab.example";
        LOG_LEVEL = "info";
        LOG_FORMAT = "json";
        MORSEL_DATA_DIR = "/var/lib/morsel/embedded";
        DATABASE_URL = "postgresql://morsel@/morsel?host=/run/postgresql";
        NODE_OPTIONS = "--max-semi-space-size=1";
        MALLOC_TRIM_THRESHOLD_ = "131072";
        MALLOC_ARENA_MAX = "1";
      })
      (expect "production: secret files are systemd credentials" server.serviceConfig.LoadCredential [
        "ADMIN_TOKEN:/run/secrets/morsel/admin"
        "OPENAI_API_KEY:/run/secrets/morsel/openai"
        "STRIPE_SECRET_KEY:/run/secrets/morsel/stripe"
        "STRIPE_WEBHOOK_SECRET:/run/secrets/morsel/stripe-webhook"
      ])
      (expect "production: the start script reads each credential, then runs morsel serve" server.script ''
        export ADMIN_TOKEN="$(< "$CREDENTIALS_DIRECTORY/ADMIN_TOKEN")"
        export OPENAI_API_KEY="$(< "$CREDENTIALS_DIRECTORY/OPENAI_API_KEY")"
        export STRIPE_SECRET_KEY="$(< "$CREDENTIALS_DIRECTORY/STRIPE_SECRET_KEY")"
        export STRIPE_WEBHOOK_SECRET="$(< "$CREDENTIALS_DIRECTORY/STRIPE_WEBHOOK_SECRET")"
        exec ${morsel} serve
      '')
      (expect "production: a dynamic user named morsel with its own state directory"
        {
          inherit (server.serviceConfig)
            DynamicUser
            User
            StateDirectory
            WorkingDirectory
            ;
        }
        {
          DynamicUser = true;
          User = "morsel";
          StateDirectory = "morsel";
          WorkingDirectory = "/var/lib/morsel";
        }
      )
      (expect "production: hardened unit"
        {
          inherit (server.serviceConfig)
            CapabilityBoundingSet
            NoNewPrivileges
            ProtectSystem
            ProtectHome
            PrivateTmp
            RestrictAddressFamilies
            UMask
            ;
        }
        {
          CapabilityBoundingSet = "";
          NoNewPrivileges = true;
          ProtectSystem = "strict";
          ProtectHome = true;
          PrivateTmp = true;
          RestrictAddressFamilies = [
            "AF_INET"
            "AF_INET6"
            "AF_UNIX"
          ];
          UMask = "0077";
        }
      )
      (expect "production: the server waits for PostgreSQL and the food-data import"
        {
          inherit (server) after requires wantedBy;
        }
        {
          after = [
            "postgresql.target"
            "network.target"
            "morsel-fooddb-import.service"
          ];
          requires = [
            "postgresql.target"
            "morsel-fooddb-import.service"
          ];
          wantedBy = [ "multi-user.target" ];
        }
      )
      (expect "production: a local database and role named morsel"
        {
          inherit (production.services.postgresql) enable ensureDatabases ensureUsers;
        }
        {
          enable = true;
          ensureDatabases = [ "morsel" ];
          ensureUsers = [
            {
              name = "morsel";
              ensureDBOwnership = true;
            }
          ];
        }
      )
      (expect "production: the port is opened" production.networking.firewall.allowedTCPPorts [ 8787 ])
      (expect "production: the import is a one-shot unit as the same user with the same credentials"
        {
          inherit (importer.serviceConfig)
            Type
            RemainAfterExit
            DynamicUser
            User
            LoadCredential
            ;
          inherit (importer) environment;
          lastLine = builtins.elemAt (builtins.split "\n" importer.script) 8;
        }
        {
          Type = "oneshot";
          RemainAfterExit = true;
          DynamicUser = true;
          User = "morsel";
          inherit (server.serviceConfig) LoadCredential;
          inherit (server) environment;
          lastLine = "exec ${morsel} fooddb import '/var/lib/usda/sr28'";
        }
      )
      (expect "production: no warnings" production.warnings [ ])
    ];

    minimal = [
      (expect "minimal: no credentials" minimal.systemd.services.morsel.serviceConfig.LoadCredential [ ])
      (expect "minimal: the script only starts the server" minimal.systemd.services.morsel.script "exec ${morsel} serve\n")
      (expect "minimal: listens on localhost:8787 with the local database"
        {
          inherit (minimal.systemd.services.morsel.environment) HOST PORT DATABASE_URL;
        }
        {
          HOST = "127.0.0.1";
          PORT = "8787";
          DATABASE_URL = "postgresql://morsel@/morsel?host=/run/postgresql";
        }
      )
      (expect "minimal: firewall untouched" minimal.networking.firewall.allowedTCPPorts [ ])
      (expect "minimal: no import unit" (minimal.systemd.services ? morsel-fooddb-import) false)
    ];

    embedded = [
      (expect "embedded: no PostgreSQL server" (embedded ? services) false)
      (expect "embedded: no DATABASE_URL, the data folder in the state directory"
        {
          hasUrl = embedded.systemd.services.morsel.environment ? DATABASE_URL;
          inherit (embedded.systemd.services.morsel.environment) MORSEL_DATA_DIR;
          inherit (embedded.systemd.services.morsel) after requires;
        }
        {
          hasUrl = false;
          MORSEL_DATA_DIR = "/var/lib/morsel/embedded";
          after = [ "network.target" ];
          requires = [ ];
        }
      )
      (expect "embedded: warns that PUBLIC_BASE_URL is unset on a public address" (builtins.length embedded.warnings) 1)
    ];

    external = [
      (expect "external: the connection string is a credential, not in the environment"
        {
          hasUrl = external.systemd.services.morsel.environment ? DATABASE_URL;
          inherit (external.systemd.services.morsel.serviceConfig) LoadCredential;
        }
        {
          hasUrl = false;
          LoadCredential = [ "DATABASE_URL:/run/secrets/morsel/database-url" ];
        }
      )
      (expect "external: a socket URL without password may stay a setting" socket.systemd.services.morsel.environment.DATABASE_URL "postgresql://morsel@/morsel?host=/run/postgresql")
    ];
  };

  refused = {
    secretInSettings = eval { settings.OPENAI_API_KEY = "sk-proj-not-a-real-key"; };
    passwordInDatabaseUrl = eval {
      database.createLocally = false;
      settings.DATABASE_URL = "postgres://morsel:hunter2@db.example.com/morsel";
    };
    databaseUrlWithLocalDatabase = eval { secretFiles.DATABASE_URL = "/run/secrets/morsel/database-url"; };
    # A Nix path such as ./admin-token (any file next to the configuration) would be copied into the store.
    secretFileAsNixPath = eval { secretFiles.ADMIN_TOKEN = ./stub-lib.nix; };
    secretFileInStore = eval { secretFiles.ADMIN_TOKEN = "${builtins.storeDir}/0000000000000000000000000000000b-admin-token"; };
    unknownOption = eval { listenPort = 80; };
  };
}
