"""The API contract against a running release server (issue 22): the served OpenAPI document
validates against the OpenAPI 3.1 meta-schema, a client generated from it round-trips a host,
and Schemathesis fuzzes every operation with the administrator token.

Usage: contract.py BASE_URL TOKEN WORKDIR
"""

import importlib
import json
import subprocess
import sys
import urllib.request
from pathlib import Path

base, token, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
work.mkdir(parents=True, exist_ok=True)

# 1. The document validates.
from openapi_spec_validator import validate

spec_path = work / "openapi.json"
with urllib.request.urlopen(f"{base}/api/openapi.json") as r:
    spec = json.load(r)
spec_path.write_text(json.dumps(spec))
validate(spec)
operations = sum(
    1 for ops in spec["paths"].values() for m in ops if m in ("get", "post", "put", "delete")
)
print(f"contract: the document validates (OpenAPI {spec['openapi']}, {operations} operations, "
      f"{len(spec['components']['schemas'])} schemas)")

# 2. A generated client round-trips a host.
client_dir = work / "client"
subprocess.run(
    [str(Path(sys.executable).parent / "openapi-python-client"), "generate", "--path",
     str(spec_path), "--meta", "none", "--output-path", str(client_dir / "svc_client"),
     "--overwrite"],
    capture_output=True, text=True,
).check_returncode()
sys.path.insert(0, str(client_dir))
svc_client = importlib.import_module("svc_client")
create = importlib.import_module("svc_client.api.objects.post_api_v1_hosts")
get_one = importlib.import_module("svc_client.api.objects.get_api_v1_objects_id")
list_hosts = importlib.import_module("svc_client.api.objects.get_api_v1_hosts")
models = importlib.import_module("svc_client.models")

client = svc_client.AuthenticatedClient(base_url=base, token=token)
body = models.ObjectBody.from_dict(
    {"name": "contract-host", "labels": {"site": "ci"}, "spec": {"address": "192.0.2.7"}}
)
created = create.sync_detailed(client=client, body=body)
assert created.status_code == 201, created.content
host = created.parsed
assert isinstance(host, models.Object), type(host)
fetched = get_one.sync(client=client, id=host.id)
assert isinstance(fetched, models.ObjectView) and fetched.name == "contract-host", fetched
page = list_hosts.sync(client=client, q="contract")
assert [h.name for h in page.items] == ["contract-host"], page
print("contract: a generated Python client created, read and listed a host")

# 3. Schemathesis over every operation. Left out: the SSE stream (it never ends), the
# directory and SSO routes (501 by SPEC until configured, which `not_a_server_error` counts as
# a failure), an incident's AI summary and the agent's chats, connections and conversations (503
# `svc:ai/disabled` by SPEC without a provider; tests/it/ai.rs covers them with one), a channel's test notification (502 by SPEC when the provider refuses, as it does
# for the channels the run invents), token rotation and revocation (the run would revoke its own
# token), and the bundle export (multi-document YAML, which Schemathesis's YAML reader cannot
# load).
result = subprocess.run(
    [str(Path(sys.executable).parent / "schemathesis"), "run", f"{base}/api/openapi.json",
     "-H", f"Authorization: Bearer {token}",
     "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,"
                 "response_schema_conformance",
     "--exclude-path-regex",
     r"^/(api/v1/stream|api/v1/directory.*|auth/oidc|auth/callback|api/v1/api-tokens/\{id\}.*"
     r"|api/v1/config/bundles:export|api/v1/channels/\{name\}:test-notification"
     r"|api/v1/incidents/\{id\}:summarize|api/v1/ai/(chat|chats|connections|conversations)(/.*|:.*)?)$",
     "--phases", "examples,coverage,fuzzing", "--max-examples", "10", "--seed", "1",
     "--generation-database", "none", "--no-shrink", "--workers", "2"],
    capture_output=True, text=True,
)
summary = result.stdout[result.stdout.find("SUMMARY"):] if "SUMMARY" in result.stdout else result.stdout[-4000:]
print(summary)
if result.returncode != 0:
    print(result.stdout[-20000:])
    print(result.stderr[-4000:])
    sys.exit("contract: Schemathesis found failures")
