"""The `hypa` CLI end to end on the real LL144 corpus and the real embedding model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bot.cli import app

ROOT = Path(__file__).resolve().parent.parent
MIRROR = Path(os.environ.get("HYPA_CORPUS_MIRROR", ROOT.parent / "shared" / "data" / "corpus"))

pytestmark = [
    pytest.mark.corpus,
    pytest.mark.model,
    pytest.mark.skipif(
        not (MIRROR / "ll144" / "LL144_rules.pdf").is_file(), reason=f"LL144 PDFs not found under {MIRROR}"
    ),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("hypa-data")


@pytest.fixture(scope="module")
def env(data_dir: Path) -> dict[str, str]:
    # The module's index is built before the per-test settings (tests/conftest.py) apply: say here too
    # that it is built with the package's model, untuned (tuning takes minutes on a slow machine).
    return {
        "HYPA_DATA_DIR": str(data_dir), "HYPA_CORPUS_MIRROR": str(MIRROR), "HF_HUB_OFFLINE": "1",
        "HYPA_TUNE_EMBEDDINGS": "false",
    }


@pytest.fixture(scope="module")
def built(env) -> dict[str, str]:
    result = CliRunner().invoke(app, ["index", "build", "ll144"], env=env)
    assert result.exit_code == 0, result.output
    return env


def test_index_build_is_idempotent(built):
    again = CliRunner().invoke(app, ["index", "build", "ll144"], env=built)
    assert again.exit_code == 0, again.output
    assert "unchanged" in again.output and "added" not in again.output


def test_the_manifest_documents_keep_their_ids_and_record_their_files(built):
    listing = CliRunner().invoke(app, ["index", "documents", "ll144"], env={**built, "COLUMNS": "250"})
    assert listing.exit_code == 0, listing.output
    lines = [line for line in listing.output.splitlines() if line.count("│") == 7]
    rows = {line.split("│")[1].strip(): line for line in lines if line.split("│")[1].strip()}
    assert set(rows) == {"ll144-definitions", "ll144-rules"}
    assert "LL144_rules.pdf" in rows["ll144-rules"]
    # where their citations link to: the manifest's patterns (nothing stored in the index)
    links = "".join(line.split("│")[6].strip() for line in lines)
    assert "rules.cityofnewyork.us" in links and "legistar.council.nyc.gov" in links and "(bot/corpora.toml)" in links


def test_ask_json_in_a_new_process(built):
    """The documented interface: one JSON object with answer, refused, citations (quote), contexts (text)."""
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "ask", "How many business days before use must candidates be notified?",
         "--collection", "ll144", "--json"],
        cwd=ROOT, env={**os.environ, **built}, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["refused"] is False
    assert "ten business days" in record["answer"] or "10 business days" in record["answer"]
    texts = {c["chunk_id"]: c["text"] for c in record["contexts"]}
    assert record["citations"], record
    for citation in record["citations"]:
        assert citation["quote"] in texts[citation["chunk_id"]]
        assert citation["label"].startswith(("Admin. Code §", "6 RCNY §"))
        # links to the official text (bot/corpora.toml): the codified code or DCWP's rule page
        code = citation["label"].startswith("Admin. Code")
        assert citation["url"] == (NYC_CODE if code else NYC_RULE), citation


NYC_CODE = "https://codelibrary.amlegal.com/codes/newyorkcity/latest/NYCadmin/0-0-0-1"
NYC_RULE = "https://rules.cityofnewyork.us/rule/automated-employment-decision-tools-updated/"


def test_out_of_scope_question_is_refused(built):
    result = CliRunner().invoke(
        app, ["ask", "What was the general sentiment of the comments in 'Candidate for Promotion' hearings?", "--json"], env=built
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["refused"] is True and record["citations"] == []


@pytest.mark.parametrize(
    "question, provision, fact",
    [
        # found refused by a new user's trial: a definition near a question the law does not answer
        ("what counts as an independent auditor?", "5-300", "objective and impartial"),
        # ... and "redo" in words the rules never use (bot/glossaries/ll144.toml)
        ("how often do we need to redo the bias audit on our resume screener?", "5-301(a)", "one year"),
    ],
)
def test_plainly_worded_questions_the_law_answers_are_answered(built, question, provision, fact):
    result = CliRunner().invoke(app, ["ask", question, "--json"], env=built)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["refused"] is False, record["answer"]
    assert provision in record["citations"][0]["label"] and fact in record["answer"], record["answer"]


def test_a_message_that_is_no_question_is_answered_and_exits_2(built):
    for message in ("   ", "?!?", "why " * 2_000):
        result = CliRunner().invoke(app, ["ask", message], env=built)
        assert result.exit_code == 2, result.output
        shown = " ".join(result.output.replace("│", " ").split()).lower()  # the panel wraps lines
        assert "Traceback" not in result.output and "please ask" in shown


def test_unknown_collection_is_a_clear_error(built):
    result = CliRunner().invoke(app, ["ask", "What is a bias audit?", "--collection", "gdpr"], env=built)
    assert result.exit_code == 1
    assert "collection 'gdpr' is not in the index" in result.output
    assert "Traceback" not in result.output
    # The same name in other letter case: the one meant, not a suggestion to ingest it again.
    cased = CliRunner().invoke(app, ["ask", "What is a bias audit?", "--collection", "LL144"], env=built)
    assert cased.exit_code == 1 and "did you mean 'll144'?" in cased.output and "ingest" not in cased.output


def test_a_missing_reranker_folder_is_a_clear_error(built, tmp_path: Path):
    result = CliRunner().invoke(
        app, ["ask", "What is a bias audit?"], env={**built, "HYPA_RERANKER_MODEL": str(tmp_path / "no-such-model")}
    )
    assert result.exit_code == 2
    assert "HYPA_RERANKER_MODEL" in " ".join(result.output.split()) and "Traceback" not in result.output


def test_corrupt_pdf_is_rejected_and_index_kept(built, tmp_path: Path):
    bad = tmp_path / "broken.pdf"
    bad.write_bytes(b"%PDF-1.7\n this is not really a pdf \x00\x01")
    result = CliRunner().invoke(app, ["ingest", str(bad), "--collection", "ll144"], env=built)
    assert result.exit_code == 1
    assert "broken.pdf" in result.output and "index unchanged" in result.output
    listing = CliRunner().invoke(app, ["index", "list"], env=built)
    assert "ll144" in listing.output


def test_ingest_own_markdown_regulation(built, tmp_path: Path):
    doc = tmp_path / "widget-rules.md"
    doc.write_text(
        "# Widget Safety Rules\n\n## Section 1. Scope.\n\n(a) These rules apply to every seller of widgets.\n\n"
        "## Section 2. Labels.\n\n(a) A seller shall attach a safety label to each widget before sale.\n"
        "(b) The label must state the maximum load in kilograms.\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["ingest", str(doc), "--collection", "widgets"], env=built)
    assert result.exit_code == 0, result.output
    ask = CliRunner().invoke(app, ["ask", "What must the label state?", "--collection", "widgets", "--json"], env=built)
    record = json.loads(ask.stdout)
    assert record["refused"] is False and "maximum load" in record["answer"]


def test_chat_understands_a_follow_up(built):
    session = (
        "I want to know how an employer can provide notice to candidates for employment.\n"
        "What are the available methods?\n/quit\n"
    )
    result = CliRunner().invoke(app, ["chat"], input=session, env=built)
    assert result.exit_code == 0, result.output
    follow_up_answer = (
        result.output.split("What are the available methods?")[-1]
        if "What are the available methods?" in result.output
        else result.output
    )
    assert "job posting" in result.output or "U.S. mail" in result.output, follow_up_answer


def test_chat_answers_a_short_follow_up_about_something_new_after_a_long_question(built):
    """"And the penalties?" after a long question about who may audit: searched together with it, the
    penalty provision was one word of many and the answer was about the auditor again."""
    session = (
        "who is allowed to do the bias audit for us? can our own data science team do it?\n"
        "and the penalties?\n/quit\n"
    )
    result = CliRunner().invoke(app, ["chat"], input=session, env=built)
    assert result.exit_code == 0, result.output
    follow_up_answer = result.output.split("you> ")[2]
    lead = follow_up_answer[: follow_up_answer.index("[1]")]  # the answer's first quote
    assert "Under Admin. Code § 20-872" in lead, follow_up_answer
    assert "$500" in follow_up_answer


def test_demo_answers_three_questions(built):
    result = CliRunner().invoke(app, ["demo"], env=built)
    assert result.exit_code == 0, result.output
    assert result.output.count("answer") >= 3
    assert "bias audit" in result.output


def _cite_first_document(request):
    """Fake Claude: answer with the first sentence of the first document, cited correctly."""
    from hypa_testkit.fakes.anthropic_server import cite, message, reply, text_block, usage

    content = request.body["messages"][-1]["content"]
    document = next(block for block in content if block.get("type") == "document")
    text = document["source"]["data"]
    quote = text.split(". ")[0]
    return reply(message([text_block(quote + ".", [cite(0, text, quote)])], model="claude-haiku-4-5",
                         usage_=usage(input_tokens=1800, output_tokens=60, cache_read_input_tokens=400)))


def test_ask_with_a_key_uses_claude_through_the_real_sdk(built):
    from hypa_testkit.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic(default=_cite_first_document) as fake:
        env = {**built, "ANTHROPIC_API_KEY": "test-key", "HYPA_ANTHROPIC_BASE_URL": fake.base_url,
               "HYPA_ANSWER_MODEL": "claude-haiku-4-5"}
        result = CliRunner().invoke(app, ["ask", "What is a bias audit?", "--json"], env=env)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["model"] == "claude-haiku-4-5" and record["refused"] is False
    texts = {c["chunk_id"]: c["text"] for c in record["contexts"]}
    assert record["citations"] and all(c["quote"] in texts[c["chunk_id"]] for c in record["citations"])
    assert record["usage"]["input_tokens"] == 1800 and record["usage"]["cache_read_input_tokens"] == 400
    sent = fake.message_requests[-1].body
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sum(1 for b in sent["messages"][-1]["content"] if b["type"] == "document") == len(record["contexts"])


def test_dead_llm_endpoint_falls_back_to_quoted_answer_and_records_the_failure(built, tmp_path: Path):
    from hypa_testkit.fakes.anthropic_server import FakeAnthropic, overloaded

    with FakeAnthropic(default=overloaded()) as fake:
        env = {**built, "ANTHROPIC_API_KEY": "test-key", "HYPA_ANTHROPIC_BASE_URL": fake.base_url,
               "HYPA_LLM_MAX_RETRIES": "1", "HYPA_LLM_BACKOFF_BASE_S": "0.01", "HYPA_LLM_BACKOFF_MAX_S": "0.02"}
        result = CliRunner().invoke(app, ["ask", "What is a bias audit?", "--json"], env=env)
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["model"] == "extractive" and record["refused"] is False and record["citations"]
    assert "Claude was unavailable" in record["note"]
    failures = [json.loads(line) for line in (Path(built["HYPA_DATA_DIR"]) / "llm_failures.jsonl").read_text().splitlines()]
    # Recorded, by length and hash: the text only with HYPA_LOG_MESSAGE_TEXT=true.
    assert any(row.get("question_chars") == len("What is a bias audit?") for row in failures)
    assert not any("What is a bias audit?" in json.dumps(row) for row in failures)


def test_chat_stores_the_thread_and_rates_the_last_answer(built):
    session = "/good\nWhat are the civil penalties?\n/bad cites the wrong section\n/bad\n/quit\n"
    result = CliRunner().invoke(app, ["chat"], input=session, env=built)
    assert result.exit_code == 0, result.output
    assert "nothing to rate yet" in result.output
    assert "rated 👎" in result.output and "already rated 👎" in result.output
    export = Path(built["HYPA_DATA_DIR"]) / "chat_feedback.jsonl"
    exported = CliRunner().invoke(app, ["feedback", "export", "--out", str(export)], env=built)
    assert exported.exit_code == 0, exported.output
    rows = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    assert [(r["platform"], r["rating"], r["question"]) for r in rows] == [
        ("terminal", -1, "What are the civil penalties?")
    ]


def test_value_questions_get_the_value_or_a_refusal(built, tmp_path: Path):
    """Our own value questions (tests/data): the law's number when it gives one, a refusal when not."""
    import tomllib

    questions = tomllib.loads((ROOT / "tests" / "data" / "ll144_value_questions.toml").read_text())["question"]
    dataset = tmp_path / "value_questions.jsonl"
    dataset.write_text("".join(json.dumps({"id": f"v{i}", "question": q["question"]}) + "\n" for i, q in enumerate(questions)))
    out = tmp_path / "value_results.jsonl"
    result = CliRunner().invoke(app, ["eval", "run", str(dataset), "--out", str(out), "--collection", "ll144"], env=built)
    assert result.exit_code == 0, result.output
    records = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    for i, q in enumerate(questions):
        record = records[f"v{i}"]
        if q["in_scope"]:
            assert not record["refused"], q["question"]
            expected = q["expect"] if isinstance(q["expect"], list) else [q["expect"]]
            assert any(e in record["answer"] for e in expected), (q["question"], record["answer"])
        elif not q.get("known_miss"):
            assert record["refused"] and record["citations"] == [], (q["question"], record["answer"])


def test_ranker_train_show_and_answer_with_the_weights(built, tmp_path: Path):
    """`hypa ranker train` on a few of our own questions writes both models; `ask` uses them."""
    rows = (ROOT / "tests" / "data" / "user_questions" / "ll144_train.jsonl").read_text().splitlines()[:6]
    questions = tmp_path / "q.jsonl"
    questions.write_text("\n".join(rows) + "\n")
    weights = tmp_path / "weights.json"
    trained = CliRunner().invoke(app, ["ranker", "train", str(questions), "--out", str(weights)], env=built)
    assert trained.exit_code == 0, trained.output
    assert set(json.loads(weights.read_text())["models"]) == {"provisions", "sentences"}
    shown = CliRunner().invoke(app, ["ranker", "show", str(weights)], env=built)
    assert shown.exit_code == 0 and "segment_terms" in shown.output and "opens_provision" in shown.output
    # --extend: a model without one feature gets that feature fitted and keeps every other weight.
    earlier = json.loads(weights.read_text())
    del earlier["models"]["provisions"]["weights"]["listed_subject"]
    (tmp_path / "earlier.json").write_text(json.dumps(earlier))
    extended = tmp_path / "extended.json"
    result = CliRunner().invoke(app, ["ranker", "train", str(questions), "--extend", str(tmp_path / "earlier.json"),
                                      "--out", str(extended)], env=built)
    assert result.exit_code == 0, result.output
    models = json.loads(extended.read_text())["models"]
    assert {f: w for f, w in models["provisions"]["weights"].items() if f != "listed_subject"} == \
        earlier["models"]["provisions"]["weights"]
    assert models["sentences"] == earlier["models"]["sentences"] and "listed_subject" in models["provisions"]["weights"]
    missing = CliRunner().invoke(app, ["ranker", "train", str(questions), "--extend", str(tmp_path / "none.json"),
                                       "--out", str(extended)], env=built)
    assert missing.exit_code != 0 and "not found" in missing.output
    env = {**built, "HYPA_RANKER_WEIGHTS": str(weights)}
    asked = CliRunner().invoke(app, ["ask", "What is the fine for a first violation?", "--json"], env=env)
    assert asked.exit_code == 0, asked.output
    weights.write_text('{"models": {"provisions": {"weights": {"chunk": 1}}}}')
    broken = CliRunner().invoke(app, ["ask", "What is the fine?"], env=env)
    assert broken.exit_code == 2 and "retrain with `hypa ranker train`" in broken.output


def test_a_question_in_spanish_is_searched_in_english_and_answered_in_spanish_with_a_key(built):
    """With a key: the rewriter translates for the search, Claude reads the user's words and answers
    in Spanish (the fake plays Claude: a JSON rewrite for the fast model, a cited answer otherwise)."""
    from hypa_testkit.fakes.anthropic_server import FakeAnthropic, cite, message, reply, text_block

    spanish = "¿Cuánto tiempo antes de usar la herramienta hay que avisar a los candidatos?"
    english = "How many business days before using the tool must candidates be notified?"

    def play_claude(request):
        body = request.body
        if "Rewrite latest_message" in json.dumps(body["messages"]):
            return reply(message(json.dumps({"standalone": english, "sub_queries": [], "language": "es"})))
        content = body["messages"][-1]["content"]
        document = next(block for block in content if block.get("type") == "document")
        text = document["source"]["data"]
        quote = text.split(". ")[0]
        return reply(message([text_block("Hay que avisar con antelación.", [cite(0, text, quote)])], model="claude-haiku-4-5"))

    with FakeAnthropic(default=play_claude) as fake:
        env = {**built, "ANTHROPIC_API_KEY": "test-key", "HYPA_ANTHROPIC_BASE_URL": fake.base_url,
               "HYPA_ANSWER_MODEL": "claude-haiku-4-5"}
        result = CliRunner().invoke(app, ["ask", spanish, "--json"], env=env)
        bodies = [r.body for r in fake.message_requests]
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["queries"][0].startswith(english)  # searched in English
    assert record["answer"].startswith("Hay que avisar con antelación.") and not record["refused"]
    rewrite, answer = bodies
    assert spanish in json.dumps(rewrite["messages"], ensure_ascii=False)  # asked even with no thread
    question_block = answer["messages"][-1]["content"][-1]
    assert question_block == {"type": "text", "text": spanish}  # Claude reads the user's own words


def test_a_question_in_german_without_a_key_asks_for_english(built):
    result = CliRunner().invoke(
        app, ["ask", "Muss ich meine Bewerber informieren, dass KI eingesetzt wird?", "--json"], env=built
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["refused"] and "English" in record["answer"] and "German" in record["answer"]
    assert record["contexts"] == []


def test_precedents_show_counts_them_and_lists_a_questions_nearest(built, tmp_path: Path):
    """`hypa precedents show`: the shipped LL144 precedents, the nearest to one of their own questions
    (which votes for the provisions that answered it), a broken own file named by line."""
    shipped = json.loads((ROOT / "bot" / "precedents" / "ll144.jsonl").read_text(encoding="utf-8").splitlines()[0])
    listing = CliRunner().invoke(app, ["precedents", "show", "ll144"], env=built)
    assert listing.exit_code == 0, listing.output
    assert "precedents tied to its provisions" in listing.output and "similarity >= 0.7" in listing.output
    near = CliRunner().invoke(app, ["precedents", "show", "ll144", shipped["question"], "-n", "2"], env=built)
    assert near.exit_code == 0, near.output
    assert "1.000 votes: " + shipped["question"][:40] in near.output and "-> Admin. Code § 20-871(b)" in near.output
    (tmp_path / "ll144.jsonl").write_text('{"question": "Who audits?"}\n', encoding="utf-8")
    broken = CliRunner().invoke(app, ["precedents", "show", "ll144"], env={**built, "HYPA_PRECEDENTS_DIR": str(tmp_path)})
    assert broken.exit_code == 1 and "ll144.jsonl:1" in broken.output and "gold_provisions" in broken.output
    off = CliRunner().invoke(app, ["precedents", "show", "ll144"], env={**built, "HYPA_PRECEDENTS": "false"})
    assert off.exit_code == 0 and "switched off" in off.output


def test_glossary_show_lists_entries_and_reads_a_question(built, tmp_path: Path):
    """`hypa glossary show`: the shipped LL144 glossary, a question read with it, a broken own file."""
    listing = CliRunner().invoke(app, ["glossary", "show", "ll144"], env=built)
    assert listing.exit_code == 0, listing.output
    assert "employment section of its website <- careers page, career page" in listing.output
    assert "(left out, the text uses them: applicants)" in listing.output
    read = CliRunner().invoke(app, ["glossary", "show", "ll144", "Does the notice go on our careers page?"], env=built)
    assert read.exit_code == 0, read.output
    assert "'careers page' -> 'employment section of its website'" in read.output
    assert "searched: Does the notice go on our careers page (employment section of its website)?" in read.output
    assert "not mentioned by the law" in listing.output and "candidates' consent <- consent" in listing.output
    assert "(check: the text uses" not in listing.output  # the shipped silences are not in the law's text
    silent = CliRunner().invoke(app, ["glossary", "show", "ll144", "We hire in NYC. Do we need candidates' consent?"], env=built)
    assert "asks about what the law does not mention: candidates' consent" in silent.output
    (tmp_path / "ll144.toml").write_text('[terms]\n"notice" = 3\n', encoding="utf-8")
    broken = CliRunner().invoke(app, ["glossary", "show", "ll144"], env={**built, "HYPA_GLOSSARY_DIR": str(tmp_path)})
    assert broken.exit_code == 1 and "expected a list of phrasings" in broken.output
