# Evaluates one NixOS module the way the module system does for what the module uses: option defaults
# and type checks (submodules and freeform settings included), unknown options refused, mkIf and mkMerge
# resolved, lists merged, and failed assertions reported as NixOS reports them.
{
  module,
  definitions,
  lib ? import ./stub-lib.nix,
  pkgs ? { },
}:
let
  inherit (builtins)
    attrNames
    concatStringsSep
    filter
    foldl'
    head
    isAttrs
    isList
    mapAttrs
    removeAttrs
    toJSON
    ;

  showPath = concatStringsSep ".";
  isOption = x: isAttrs x && x._type or null == "option";
  describe = value: if builtins.isPath value then "the path ${toString value}" else toJSON value;

  # The value of each declared option under `path`, from its definition or its default.
  resolveOptions =
    path: declarations: defs:
    let
      unknown = removeAttrs defs (attrNames declarations);
    in
    if unknown != { } then
      throw "The option `${showPath (path ++ [ (head (attrNames unknown)) ])}' does not exist."
    else
      mapAttrs (
        name: decl:
        if isOption decl then
          resolveOption (path ++ [ name ]) decl defs
        else
          resolveOptions (path ++ [ name ]) decl (defs.${name} or { })
      ) declarations;

  resolveOption =
    path: decl: defs:
    let
      name = builtins.elemAt path (builtins.length path - 1);
      value =
        if defs ? ${name} then
          defs.${name}
        else if decl ? default then
          decl.default
        else
          throw "The option `${showPath path}' is used but not defined.";
    in
    if decl.type.name == "submodule" then
      resolveSubmodule path decl.type value
    else if decl.type.check value then
      value
    else
      throw "A definition for option `${showPath path}' is not of type `${decl.type.description or decl.type.name}'. Definition value: ${describe value}";

  resolveSubmodule =
    path: type: defs:
    let
      free = removeAttrs defs (attrNames type.options);
      declared = resolveOptions path type.options (removeAttrs defs (attrNames free));
    in
    if free == { } then
      declared
    else if type.freeformType == null then
      throw "The option `${showPath (path ++ [ (head (attrNames free)) ])}' does not exist."
    else if !type.freeformType.check free then
      throw "A definition under `${showPath path}' is not of type `${type.freeformType.name}'."
    else
      declared // free;

  # Module output with mkIf/mkMerge taken out; `null` marks what a false mkIf removed.
  resolveConfig =
    x:
    if !(isAttrs x) || x.type or null == "derivation" then
      x
    else if x._type or null == "if" then
      (if x.condition then resolveConfig x.content else null)
    else if x._type or null == "merge" then
      foldl' merge { } (filter (c: c != null) (map resolveConfig x.contents))
    else
      lib.filterAttrs (_: v: v != null) (mapAttrs (_: resolveConfig) x);

  merge =
    a: b:
    if isAttrs a && isAttrs b then
      a // mapAttrs (name: value: if a ? ${name} then merge a.${name} value else value) b
    else if isList a && isList b then
      a ++ b
    else if a == b then
      a
    else
      throw "The option has conflicting definition values: ${toJSON a} and ${toJSON b}";

  config = {
    services.morsel = resolveOptions [
      "services"
      "morsel"
    ] evaluated.options.services.morsel (definitions.services.morsel or { });
  };
  evaluated = (if builtins.isPath module then import module else module) { inherit config lib pkgs; };

  system = resolveConfig evaluated.config;
  failed = map (a: a.message) (filter (a: !a.assertion) (system.assertions or [ ]));
in
if failed != [ ] then
  throw "\nFailed assertions:\n${concatStringsSep "\n" (map (m: "- ${m}") failed)}"
else
  {
    inherit config;
    system = if system == null then { } else system;
  }
