# The part of nixpkgs' `lib` that nix/module.nix uses, with the same meaning, so the module can be
# evaluated without fetching nixpkgs. Option types carry only what evaluation needs: a name and a check.
let
  inherit (builtins)
    all
    attrNames
    attrValues
    concatMap
    concatStringsSep
    elem
    isAttrs
    isInt
    isList
    isPath
    isString
    listToAttrs
    replaceStrings
    stringLength
    substring
    ;

  mkOptionType = attrs: { _type = "option-type"; } // attrs;

  isStringLike = x: isString x || isPath x || (isAttrs x && x ? outPath);
in
rec {
  inherit (builtins)
    any
    attrNames
    concatStringsSep
    elem
    filter
    isList
    isString
    mapAttrs
    ;

  concatMapStrings = f: list: concatStringsSep "" (map f list);
  filterAttrs =
    pred: set:
    listToAttrs (
      concatMap (name: if pred name set.${name} then [ { inherit name; value = set.${name}; } ] else [ ]) (
        attrNames set
      )
    );
  genAttrs = names: f: listToAttrs (map (name: { inherit name; value = f name; }) names);
  mapAttrsToList = f: set: map (name: f name set.${name}) (attrNames set);
  hasPrefix = prefix: s: substring 0 (stringLength prefix) s == prefix;
  optional = cond: x: if cond then [ x ] else [ ];
  optionals = cond: xs: if cond then xs else [ ];
  optionalAttrs = cond: set: if cond then set else { };
  toLower =
    replaceStrings
      [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ]
      [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ];
  escapeShellArg = arg: "'${replaceStrings [ "'" ] [ "'\\''" ] (toString arg)}'";
  getExe = pkg: "${pkg}/bin/${pkg.meta.mainProgram}";
  literalExpression = text: {
    _type = "literalExpression";
    inherit text;
  };

  mkOption = attrs: attrs // { _type = "option"; };
  mkEnableOption =
    name:
    mkOption {
      type = types.bool;
      default = false;
      description = "Whether to enable ${name}.";
    };
  mkIf = condition: content: {
    _type = "if";
    inherit condition content;
  };
  mkMerge = contents: {
    _type = "merge";
    inherit contents;
  };

  types = rec {
    bool = mkOptionType {
      name = "bool";
      check = builtins.isBool;
    };
    int = mkOptionType {
      name = "int";
      check = isInt;
    };
    ints.positive = mkOptionType {
      name = "positiveInt";
      check = x: isInt x && x > 0;
    };
    port = mkOptionType {
      name = "port";
      check = x: isInt x && x >= 0 && x <= 65535;
    };
    str = mkOptionType {
      name = "str";
      check = isString;
    };
    path = mkOptionType {
      name = "path";
      check = x: isStringLike x && substring 0 1 (toString x) == "/";
    };
    package = mkOptionType {
      name = "package";
      check = x: isAttrs x && x.type or null == "derivation";
    };
    enum =
      values:
      mkOptionType {
        name = "enum";
        check = x: elem x values;
      };
    nullOr =
      t:
      mkOptionType {
        name = "nullOr ${t.name}";
        check = x: x == null || t.check x;
      };
    listOf =
      t:
      mkOptionType {
        name = "listOf ${t.name}";
        check = x: isList x && all t.check x;
      };
    attrsOf =
      t:
      mkOptionType {
        name = "attrsOf ${t.name}";
        check = x: isAttrs x && all t.check (attrValues x);
      };
    either =
      a: b:
      mkOptionType {
        name = "either ${a.name} ${b.name}";
        check = x: a.check x || b.check x;
      };
    oneOf =
      ts:
      mkOptionType {
        name = "oneOf";
        check = x: builtins.any (t: t.check x) ts;
      };
    submodule =
      module:
      mkOptionType {
        name = "submodule";
        check = isAttrs;
        options = module.options or { };
        freeformType = module.freeformType or null;
      };
  };
}
