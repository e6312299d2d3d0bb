"""Make projects, users, role assignments and a catalog entry with openstacksdk.

Run by the clients venv's python, never imported by ours. stdin: ``{"auth_url", "password"
(the bootstrap admin's), "region", "projects": [name...], "users": [{"name", "password",
"project": name | null, "roles": [...], "system_roles": [...]}], "services": [{"type",
"name", "url"}]}``. stdout: ``{"projects": {name: id}}``.
"""

import json
import sys

import openstack


def main() -> None:
    spec = json.load(sys.stdin)
    conn = openstack.connect(auth_url=spec["auth_url"], username="admin",
                             password=spec["password"], system_scope="all",
                             user_domain_id="default", region_name=spec["region"])
    identity = conn.identity
    existing = {role.name: role for role in identity.roles()}
    wanted = {name for user in spec["users"] for name in
              (*user.get("roles", ()), *user.get("system_roles", ()))}
    for name in sorted(wanted - set(existing)):  # e.g. "service" on older Keystones
        existing[name] = identity.create_role(name=name)
    projects = {name: identity.create_project(name=name, domain_id="default")
                for name in spec["projects"]}
    for user_spec in spec["users"]:
        user = identity.create_user(name=user_spec["name"], password=user_spec["password"],
                                    domain_id="default")
        for role in user_spec.get("roles", ()):
            identity.assign_project_role_to_user(projects[user_spec["project"]], user,
                                                 existing[role])
        for role in user_spec.get("system_roles", ()):
            identity.assign_system_role_to_user(user=user, role=existing[role], system="all")
    for service_spec in spec.get("services", ()):
        service = identity.create_service(type=service_spec["type"],
                                          name=service_spec["name"])
        for interface in ("public", "internal"):
            identity.create_endpoint(service_id=service.id, interface=interface,
                                     url=service_spec["url"], region_id=spec["region"])
    json.dump({"projects": {name: project.id for name, project in projects.items()}},
              sys.stdout)


if __name__ == "__main__":
    main()
