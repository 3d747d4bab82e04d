# NixOS module `services.morsel`: the service as a hardened systemd unit, settings as its environment,
# secrets through systemd credentials, optionally a local PostgreSQL and a USDA food-data import.
{
  config,
  lib,
  pkgs,
  ...
}:
let
  inherit (lib)
    any
    attrNames
    concatMapStrings
    concatStringsSep
    elem
    escapeShellArg
    filter
    filterAttrs
    genAttrs
    getExe
    hasPrefix
    isList
    isString
    literalExpression
    mapAttrs
    mapAttrsToList
    mkEnableOption
    mkIf
    mkMerge
    mkOption
    optional
    optionalAttrs
    optionals
    toLower
    types
    ;

  cfg = config.services.morsel;

  # Settings that hold secrets. Anything in `settings` ends up in the world-readable Nix store, so these
  # are only accepted as files (`secretFiles`), handed to the unit as systemd credentials.
  secretNames = [
    "OPENAI_API_KEY"
    "FDC_API_KEY"
    "STRIPE_SECRET_KEY"
    "STRIPE_WEBHOOK_SECRET"
    "X402_SETTLER_PRIVATE_KEY"
    "ADMIN_TOKEN"
    "DATABASE_URL"
  ];

  localDatabaseUrl = "postgresql://morsel@/morsel?host=/run/postgresql";

  # A connection string may name a server without a password (a unix socket, peer authentication).
  hasPassword = url: builtins.match "[a-z]+://[^/@]*:[^/@]*@.*" url != null;
  isSecretSetting =
    name: cfg.settings ? ${name} && (name != "DATABASE_URL" || hasPassword (toString cfg.settings.${name}));
  secretsInSettings = filter isSecretSetting secretNames;

  # A string that names a file outside the store: a path literal would copy the secret into the store.
  secretFile = types.nullOr (
    types.str
    // {
      name = "secretFile";
      description = "absolute path of a file (a string, not a Nix path)";
      check = it: isString it && hasPrefix "/" it && !(hasPrefix builtins.storeDir it);
    }
  );

  positiveLimit =
    description:
    mkOption {
      type = types.nullOr types.ints.positive;
      default = null;
      inherit description;
    };

  environment =
    mapAttrs (_: value: if isList value then concatStringsSep "," value else toString value) (
      filterAttrs (_: value: value != null && value != [ ]) cfg.settings
      // optionalAttrs cfg.database.createLocally { DATABASE_URL = localDatabaseUrl; }
    )
    // memoryTuning;

  # What `morsel serve` would otherwise restart itself with (bin/tuning.js): 1 MB young-generation semi-spaces and
  # a malloc that gives freed blocks back from one arena, about 140 MiB less held by the sandbox at idle; set here,
  # the unit runs one process.
  memoryTuning = {
    NODE_OPTIONS = "--max-semi-space-size=1";
    MALLOC_TRIM_THRESHOLD_ = "131072";
    MALLOC_ARENA_MAX = "1";
  };

  secrets = filterAttrs (_: file: file != null) cfg.secretFiles;

  # Reads each credential into the variable of the same name, so the server sees plain settings while the
  # secret never appears in the unit file, the store or `systemctl show`.
  withSecrets =
    command:
    concatMapStrings (name: "export ${name}=\"$(< \"$CREDENTIALS_DIRECTORY/${name}\")\"\n") (attrNames secrets)
    + "exec ${command}\n";

  unitBase = {
    inherit environment;
    after = optional cfg.database.createLocally "postgresql.target";
    requires = optional cfg.database.createLocally "postgresql.target";
    serviceConfig = {
      # The same dynamic user for the server and the import: its name matches the local database role,
      # so PostgreSQL's peer authentication on the unix socket lets it in without a password.
      DynamicUser = true;
      User = "morsel";
      Group = "morsel";
      StateDirectory = "morsel";
      StateDirectoryMode = "0700";
      WorkingDirectory = "/var/lib/morsel";
      LoadCredential = mapAttrsToList (name: file: "${name}:${file}") secrets;
      UMask = "0077";

      CapabilityBoundingSet = "";
      DevicePolicy = "closed";
      LockPersonality = true;
      # V8 compiles JavaScript at run time: MemoryDenyWriteExecute would stop node.
      MemoryDenyWriteExecute = false;
      NoNewPrivileges = true;
      PrivateDevices = true;
      PrivateMounts = true;
      PrivateTmp = true;
      PrivateUsers = true;
      ProtectClock = true;
      ProtectControlGroups = true;
      ProtectHome = true;
      ProtectHostname = true;
      ProtectKernelLogs = true;
      ProtectKernelModules = true;
      ProtectKernelTunables = true;
      ProtectProc = "invisible";
      ProtectSystem = "strict";
      RemoveIPC = true;
      RestrictAddressFamilies = [
        "AF_INET"
        "AF_INET6"
        "AF_UNIX"
      ];
      RestrictNamespaces = true;
      RestrictRealtime = true;
      RestrictSUIDSGID = true;
      SystemCallArchitectures = "native";
      SystemCallFilter = [
        "@system-service"
        "~@privileged"
      ];
    };
  };
in
{
  options.services.morsel = {
    enable = mkEnableOption "morsel, the food-photo nutrition service";

    package = mkOption {
      type = types.package;
      defaultText = literalExpression "morsel.packages.\${system}.default";
      description = "The morsel package. The flake's module sets it to the flake's own package.";
    };

    settings = mkOption {
      default = { };
      example = {
        HOST = "0.0.0.0";
        PUBLIC_BASE_URL = "https://morsel.example.com";
        X402_PAY_TO = "0x209693Bc6afc0C5328bA36FaF03C514EF312287C";
        LIMIT_GLOBAL_PER_DAY = 1000;
      };
      description = ''
        Settings of the service, passed as its environment (see docs/settings.md). Lists become
        comma-separated values. Secrets do not belong here: use {option}`services.morsel.secretFiles`.
      '';
      type = types.submodule {
        freeformType = types.attrsOf (
          types.nullOr (
            types.oneOf [
              types.str
              types.int
              (types.listOf types.str)
            ]
          )
        );
        options = {
          HOST = mkOption {
            type = types.str;
            default = "127.0.0.1";
            example = "0.0.0.0";
            description = "Address to listen on.";
          };
          PORT = mkOption {
            type = types.port;
            default = 8787;
            description = "Port to listen on.";
          };
          PUBLIC_BASE_URL = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "https://morsel.example.com";
            description = ''
              Absolute base URL clients reach the service at (x402 `resource.url`, checkout return pages).
              Unset: `http://HOST:PORT`.
            '';
          };
          MORSEL_DATA_DIR = mkOption {
            type = types.str;
            default = "/var/lib/morsel/embedded";
            description = "Folder of the embedded database, used when no PostgreSQL server is configured.";
          };
          OPENAI_BASE_URL = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "http://127.0.0.1:11434/v1";
            description = "An OpenAI-compatible server for the vision model. Unset: OpenAI's.";
          };
          VISION_MODEL = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "gpt-5-mini";
            description = "Vision model name, reported in each result. Unset: the service's default.";
          };
          TRUSTED_ORIGINS = mkOption {
            type = types.listOf types.str;
            default = [ ];
            example = [ "https://app.example.com" ];
            description = "Browser origins allowed to call the service.";
          };
          OPERATOR_NAME = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "Kitchen Lab";
            description = "Who runs this instance; shown in the web page's footer.";
          };
          SUPPORT_CONTACT = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "help@kitchen-lab.example";
            description = ''
              An e-mail address or an http(s) URL where cardholders reach the operator: shown in the footer,
              next to a paused key and on the checkout return pages.
            '';
          };
          TERMS_URL = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "https://kitchen-lab.example/terms";
            description = "The operator's terms, with the refund policy; linked from the web page's footer.";
          };
          PRIVACY_URL = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "https://kitchen-lab.example/privacy";
            description = "The operator's privacy policy; linked from the web page's footer.";
          };
          LOG_LEVEL = mkOption {
            type = types.enum [
              "all"
              "trace"
              "debug"
              "info"
              "warning"
              "error"
              "fatal"
              "none"
            ];
            default = "info";
            description = "Lowest level logged.";
          };
          LOG_FORMAT = mkOption {
            type = types.enum [
              "json"
              "pretty"
            ];
            default = "json";
            description = "Log format; the journal keeps one JSON object a line.";
          };
          LIMIT_GLOBAL_PER_DAY = positiveLimit "Analyses a day, all payers together.";
          LIMIT_GLOBAL_PER_HOUR = positiveLimit "Analyses an hour, all payers together.";
          LIMIT_PAYER_PER_DAY = positiveLimit "Analyses a day for one key or wallet.";
          LIMIT_CONCURRENT = positiveLimit "Analyses running at once.";
          LIMIT_X402_PER_DAY = positiveLimit "x402-paid analyses a day.";
          LIMIT_X402_PER_HOUR = positiveLimit "x402-paid analyses an hour.";
          LIMIT_X402_CONCURRENT = positiveLimit "x402-paid analyses running at once.";
          LIMIT_FAILURES_PER_DAY = positiveLimit "Failed analyses a day before a payer is refused.";
          LIMIT_FEEDBACK_PER_KEY_PER_DAY = positiveLimit "Feedback reports a day for one key.";
          LIMIT_FEEDBACK_GLOBAL_PER_DAY = positiveLimit "Feedback reports a day, all keys together.";
        };
      };
    };

    secretFiles = mkOption {
      default = { };
      example = {
        OPENAI_API_KEY = "/run/secrets/morsel/openai-api-key";
        STRIPE_SECRET_KEY = "/run/secrets/morsel/stripe-secret-key";
        STRIPE_WEBHOOK_SECRET = "/run/secrets/morsel/stripe-webhook-secret";
      };
      description = ''
        Files holding secret settings, one value a file. systemd reads them as credentials
        (`LoadCredential`), so they may belong to root with mode 0400 and never enter the Nix store.
      '';
      type = types.submodule {
        options = genAttrs secretNames (
          name:
          mkOption {
            type = secretFile;
            default = null;
            example = "/run/secrets/morsel/${toLower name}";
            description = "File holding {env}`${name}`.";
          }
        );
      };
    };

    database.createLocally = mkOption {
      type = types.bool;
      default = true;
      description = ''
        Run a local PostgreSQL with a `morsel` database owned by the `morsel` role, reached over the
        unix socket with peer authentication. Off: set `secretFiles.DATABASE_URL` for another server, or
        leave it unset for the embedded database in `settings.MORSEL_DATA_DIR` (one connection; fine for
        a trial, not for production load).
      '';
    };

    foodData = mkOption {
      type = types.nullOr (types.either types.path types.str);
      default = null;
      example = literalExpression ''
        pkgs.fetchzip {
          url = "https://fdc.nal.usda.gov/fdc-datasets/FoodData_Central_sr_legacy_food_csv_2018-04.zip";
          hash = "…";
        }
      '';
      description = ''
        USDA food data to import before the server starts: the SR28 ASCII files or a FoodData Central CSV
        download, as a folder or a zip. `morsel-fooddb-import.service` imports it at boot and whenever the
        value changes (an import replaces records, never duplicates them, and takes seconds); the server
        starts after it and does not start if the import fails.
      '';
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = "Open {option}`services.morsel.settings.PORT` in the firewall.";
    };
  };

  config = mkIf cfg.enable (mkMerge [
    {
      assertions = [
        {
          assertion = secretsInSettings == [ ];
          message = "services.morsel.settings holds a secret (${concatStringsSep ", " secretsInSettings}), which would be world-readable in the Nix store: write each to a file and name the file in services.morsel.secretFiles instead.";
        }
        {
          assertion =
            cfg.database.createLocally -> cfg.secretFiles.DATABASE_URL == null && !(cfg.settings ? DATABASE_URL);
          message = "services.morsel.database.createLocally connects to the local PostgreSQL: remove DATABASE_URL from services.morsel.settings and services.morsel.secretFiles, or turn createLocally off.";
        }
      ];

      warnings = optional (elem cfg.settings.HOST [ "0.0.0.0" "::" ] && cfg.settings.PUBLIC_BASE_URL == null)
        "services.morsel.settings.PUBLIC_BASE_URL is unset while the service listens on all addresses: payment challenges and checkout return pages will name http://${cfg.settings.HOST}:${toString cfg.settings.PORT}.";

      systemd.services.morsel = unitBase // {
        description = "morsel food-photo nutrition service";
        wantedBy = [ "multi-user.target" ];
        after = unitBase.after ++ [ "network.target" ] ++ optional (cfg.foodData != null) "morsel-fooddb-import.service";
        requires = unitBase.requires ++ optional (cfg.foodData != null) "morsel-fooddb-import.service";
        script = withSecrets "${getExe cfg.package} serve";
        serviceConfig = unitBase.serviceConfig // {
          Type = "simple";
          Restart = "on-failure";
          RestartSec = 5;
        };
      };

      networking.firewall.allowedTCPPorts = optionals cfg.openFirewall [ cfg.settings.PORT ];
    }

    (mkIf cfg.database.createLocally {
      services.postgresql = {
        enable = true;
        ensureDatabases = [ "morsel" ];
        ensureUsers = [
          {
            name = "morsel";
            ensureDBOwnership = true;
          }
        ];
      };
    })

    (mkIf (cfg.foodData != null) {
      # Runs before the server and again whenever the data changes; restarting it restarts the server
      # (Requires=), so the embedded database is never opened by two processes.
      systemd.services.morsel-fooddb-import = unitBase // {
        description = "Import USDA food data into morsel's database";
        script = withSecrets "${getExe cfg.package} fooddb import ${escapeShellArg "${cfg.foodData}"}";
        serviceConfig = unitBase.serviceConfig // {
          Type = "oneshot";
          RemainAfterExit = true;
        };
      };
    })
  ]);
}
