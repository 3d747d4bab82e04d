# NixOS VM test (`nix flake check`): the module on a machine with a local PostgreSQL and an admin token
# read from a file, the service answering, migrations in the local database, the token never in the unit.
{ self }:
{ pkgs, ... }:
{
  name = "morsel";

  nodes.machine = {
    imports = [ self.nixosModules.default ];

    services.morsel = {
      enable = true;
      settings.PUBLIC_BASE_URL = "http://machine:8787";
      secretFiles.ADMIN_TOKEN = "/etc/morsel/admin-token";
    };

    # Only for this test machine: a real deployment keeps the file out of the store (agenix, sops-nix, …).
    environment.etc."morsel/admin-token" = {
      text = "vm-test-admin-token";
      mode = "0400";
    };
    environment.systemPackages = [ pkgs.curl ];
  };

  testScript = ''
    machine.wait_for_unit("morsel.service")
    machine.wait_for_open_port(8787)

    health = machine.succeed("curl -sf http://127.0.0.1:8787/health")
    assert '"status":"ok"' in health, health

    # ADMIN_TOKEN reached the server: the admin path exists and refuses a wrong token.
    status = machine.succeed(
        "curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer wrong' "
        "-H 'Content-Type: application/json' -d '{}' http://127.0.0.1:8787/admin/rpc"
    )
    assert status == "401", status
    machine.fail("systemctl show morsel.service --property=Environment | grep -q vm-test-admin-token")

    # The server migrated the local database it reached over the unix socket.
    machine.succeed("sudo -u postgres psql --dbname=morsel --tuples-only --command='select 1 from morsel_migrations limit 1' | grep -q 1")
  '';
}
