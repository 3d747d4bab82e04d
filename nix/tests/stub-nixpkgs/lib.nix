# The `lib` functions flake.nix and nix/package.nix use, on top of the module's stub lib.
let
  inherit (builtins)
    concatLists
    concatStringsSep
    filter
    isList
    isString
    length
    elemAt
    split
    ;
  moduleLib = import ../stub-lib.nix;
in
moduleLib
// rec {
  inherit (builtins) attrValues fromJSON readFile;
  importJSON = path: fromJSON (readFile path);
  last = list: elemAt list (length list - 1);
  splitString = sep: s: filter isString (split (escapeRegex sep) s);
  escapeRegex = builtins.replaceStrings [ "." "/" "+" "*" "?" "(" ")" "[" "]" ] [ "\\." "/" "\\+" "\\*" "\\?" "\\(" "\\)" "\\[" "\\]" ];
  flatten = x: if isList x then concatLists (map flatten x) else [ x ];
  concatLines = lines: concatStringsSep "" (map (line: "${line}\n") lines);
  optionalString = cond: s: if cond then s else "";
  getName = pkg: pkg.pname or pkg.name;
  assertMsg = pred: msg: pred || throw msg;
  mkDefault = content: {
    _type = "override";
    priority = 1000;
    inherit content;
  };
  licenses.unfree = {
    shortName = "unfree";
    free = false;
  };
  # Source filtering keeps the whole tree here: what it selects is only known to a real evaluation.
  fileset = {
    toSource = { root, fileset }: root;
    difference = a: _: a;
    unions = list: list;
    maybeMissing = path: path;
  };
}
