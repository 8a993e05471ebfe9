"""The secret rules (assistant/store/secret_rules.yaml): every rule hides its sample of the
corpus, whole, and nothing else of the line; ordinary diag output comes out unchanged; the
Go-to-Python translation of gitleaks' patterns and the lead-literal search keep their meaning."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assistant.store import gitleaks
from assistant.store.redact import MARK, redact_text
from assistant.store.secret_rules import entropy, load_data, rule_set
from tests import yamlc
from tests.store.secret_corpus import CORPUS

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = yamlc.load(CORPUS.read_text(encoding="utf-8"))


def test_every_rule_has_one_sample_and_hides_it_whole() -> None:
    """Each rule alone hides its own sample's secret, so does the whole redactor, and the line
    before the secret is kept as it was (only the secret is replaced)."""
    rules = rule_set()
    by_id = {rule.id: rule for rule in rules.rules}
    assert sorted(s["rule"] for s in SAMPLES) == sorted(by_id)  # one each, no stray one
    failed = []
    for sample in SAMPLES:
        text, secret = sample["text"], sample["secret"]
        assert secret in text, sample["rule"]
        alone, out = by_id[sample["rule"]].hide(text, rules.shared), redact_text(text)
        before = text[:text.index(secret)].rsplit("\n", 1)[-1]
        if secret in alone or secret in out or MARK not in out or before not in out:
            failed.append((sample["rule"], out))
    assert not failed, failed


def test_rules_are_data_with_their_source() -> None:
    data = load_data()
    rules = data["rules"]
    ids = [r["id"] for r in rules]
    assert len(ids) == len(set(ids))
    version = data["gitleaks"]["version"]
    taken = [r for r in rules if r["source"].startswith("gitleaks ")]
    assert len(taken) >= 200
    for rule in rules:
        assert set(rule) >= {"id", "source", "regex", "keywords", "group"}, rule["id"]
        assert rule["keywords"] and all(k == k.lower() for k in rule["keywords"]), rule["id"]
    for rule in taken:
        assert rule["source"] == f"gitleaks {version} {rule['id']}"
    assert all(why for why in data["left_out"].values())
    assert not set(data["left_out"]) & set(ids)
    assert set(data["left_out"]) <= {*gitleaks.LEFT_OUT, "freemius-secret-key",
                                     "hashicorp-tf-password", "nuget-config-password"}
    # gitleaks gives any other rule's finding precedence over its generic one: it runs last
    assert [r["id"] for r in taken][-1] == "generic-api-key"


def _fixture_texts() -> list[tuple[str, str]]:
    paths = [*sorted((ROOT / "fixtures/real").glob("*.txt")),
             *sorted((ROOT / "fixtures/scenarios").rglob("*.txt")),
             *sorted((ROOT / "fixtures/scenarios").rglob("*.yaml"))]
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8", errors="replace"))
            for p in paths]


HEALTHY = [
    "GPU 00000000:4C:00.0  UUID: GPU-5b8a3f5e-9c2d-4e1f-a0b7-3c6d9e2f1a4b",
    "NCCL INFO comm 0x55d4c8a0 rank 3 nranks 16 cudaDev 3 busId 4c000 commId "
    "0x8e9f5a4b3c2d1e0f - Init COMPLETE",
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ens1f0:10.0.0.11<0>",
    "loading /ckpt/run-7/model-00001-of-00004.safetensors sha256=9f86d081884c7d659a2feaa0c55ad0"
    "15a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855  /ckpt/step_3000.pt",
    "git rev-parse HEAD: 1f0c3ab5d2e4f6a7b8c9d0e1f2a3b4c5d6e7f8a9",
    "gpu017.cluster.corp: Node GUID 0x043f720300e1a2b4, Port GUID 0x043f720300e1a2b5",
    "ib0: LID 0x0012 SM LID 0x0001 pkey 0xffff partition key default",
    "api_version=2024-05-01 key=driver_version cudaDriverVersion=12040 sm_clock=1980",
    "slurmstepd: error: *** JOB 4711 ON gpu017 CANCELLED AT 2024-05-02T03:14:07 ***",
]


def test_ordinary_diag_output_is_left_unchanged() -> None:
    """Every recorded sample and scenario output (GPU UUIDs, PCI bus ids, GUIDs, hashes in
    file names, NCCL lines, host names): no rule takes any of it for a secret."""
    changed = [name for name, text in _fixture_texts() if redact_text(text) != text]
    assert not changed, changed
    assert [line for line in HEALTHY if redact_text(line) != line] == []


def test_a_rule_is_tried_only_where_its_lead_is_and_finds_what_finditer_finds() -> None:
    texts = [s["text"] for s in SAMPLES] + [text for _, text in _fixture_texts()[:40]] + [
        # a failed attempt makes later starts on its line useless, but not earlier lines nor
        # a start inside what the command's name took
        "curl -s x; curl -u admin:Hunter2xx https://a\ncurl -u root:Hunter3yy https://b",
        "docker docker login -u x -p Hunter2xx r.io; mysqlmysql -pHunter4", "curl curl \\\n"
        "  -H 'Authorization: Bearer Zm9vYmFyYmF6cXV4MTIz' https://x",
        "wandb login --host https://w wandb login 0f9e8d7c6b5a49382716f5e4d3c2b1a098765432"]
    for rule in rule_set().rules:
        if not rule.lead:
            continue
        for text in texts:
            if text.isascii():
                led = [m.span() for m in rule._matches(text, text.lower(), {})]
                assert led == [m.span() for m in rule.pattern.finditer(text)], rule.id


def test_the_filters_are_gitleaks_own() -> None:
    """Entropy as gitleaks computes it; a rule's allowlists (its match widened back over the
    name gitleaks' pattern started with) and the shared one let non-secrets through."""
    assert entropy("") == 0 and entropy("aaaa") == 0 and entropy("abab") == 1.0
    assert round(entropy("0123456789abcdef"), 6) == 4.0
    generic = next(r for r in rule_set().rules if r.id == "generic-api-key")
    shared = rule_set().shared
    assert generic.hide("secret = 9f2Xa7Lq3ZpT8cVb1Nw", shared) == f"secret = {MARK}"
    assert generic.hide("primary_key = 9f2Xa7Lq3ZpT8cVb1Nw", shared) \
        == "primary_key = 9f2Xa7Lq3ZpT8cVb1Nw"  # allowed on its whole name (match target)
    assert generic.hide("token = aaaaaaaaaaaaaaaa", shared) == "token = aaaaaaaaaaaaaaaa"
    assert generic.hide("password = ${DB_PASSWORD}", shared) == "password = ${DB_PASSWORD}"
    aws = next(r for r in rule_set().rules if r.id == "aws-access-token")
    assert aws.hide("AKIAIOSFODNN7EXAMPLE", shared) == "AKIAIOSFODNN7EXAMPLE"


@pytest.mark.parametrize(("go", "python"), [
    (r"\b(p8e-(?i)[a-z0-9]{32})(?:x|$)", r"\b(p8e-(?i:[a-z0-9]{32}))(?:x|\Z)"),
    (r"a(?i)b|c", r"a(?i:b)|(?i:c)"),
    (r"(?i)abc", r"(?i)abc"),
    (r"\b(pat[[:alnum:]]{14})\z", r"\b(pat[a-zA-Z0-9]{14})\Z"),
    (r"[\w=~@.+/-]{8,}", r"[\w=\~@.+/-]{8,}"),
    (r"(?-i:ATLASSIAN|[Aa]tlassian)", r"(?-i:ATLASSIAN|[Aa]tlassian)"),
    (r"(?<name>x)", r"(?P<name>x)"),
])
def test_go_patterns_keep_their_meaning_in_python(go: str, python: str) -> None:
    assert gitleaks.translate(go) == python
    re.compile(python)


@pytest.mark.parametrize("go", [r"\pL+", r"\Qa.b\E", r"(?m)^x$", r"(?U)a+", r"x{,3}"])
def test_what_python_cannot_say_is_left_out(go: str) -> None:
    with pytest.raises(gitleaks.Untranslatable):
        gitleaks.translate(go)


def test_a_name_prefix_is_dropped_and_remembered() -> None:
    assert gitleaks.strip_name_prefix(r"(?i)[\w.-]{0,50}?(?:etsy)x") == (r"(?i)(?:etsy)x", 50)
    assert gitleaks.strip_name_prefix(r"[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:sumo))x") \
        == (r"(?i:(?:sumo))x", 100)
