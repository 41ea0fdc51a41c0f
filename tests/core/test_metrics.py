"""The engines' own numbers: their /metrics pages parsed with the Prometheus client's parser and
read over time (rates from counters, TTFT quantiles from histograms, restarts, stale readings).

The pages below are written in the formats the engines serve (both through prometheus_client):
SGLang's ``sglang:`` series with ``model_name`` (and ``engine_type``, ``tp_rank``, ``pp_rank``)
labels, vLLM's ``vllm:`` series with ``model_name`` and ``engine`` labels and the ``_created``
gauges prometheus_client adds to counters and histograms. Every expected number is worked out
by hand in the comments beside it.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparktui.core.engines import engine
from sparktui.core.metrics import (
    LABELS,
    PULSE_KEYS,
    THRESHOLDS,
    MetricSeries,
    MetricsSpec,
    MetricsUnreadable,
    Pulse,
    Scrape,
    group_values,
    level,
    parse_exposition,
    quantile,
    shown,
)

SGLANG = engine("sglang").metrics
VLLM = engine("vllm").metrics

_SG = 'engine_type="unified",model_name="Qwen/Qwen3-0.6B",pp_rank="0",tp_rank="0"'
_SGT = 'engine_type="unified",model_name="Qwen/Qwen3-0.6B"'


def sglang_page(*, running: float, queued: float, throughput: float, usage: float,
                hit: float, prompt: float, ttft: tuple[int, ...]) -> str:
    """SGLang 0.5's page (--enable-metrics): schedulers' gauges, tokenizer manager's counters and
    TTFT histogram (its buckets; here the first six), a family sparktui does not read, and
    spec_accept_length NaN (no speculative decoding: not known)."""
    les = ("0.1", "0.25", "0.5", "1.0", "2.5", "+Inf")
    buckets = "".join(f'sglang:time_to_first_token_seconds_bucket{{{_SGT},le="{le}"}} {n}.0\n'
                      for le, n in zip(les, ttft, strict=True))
    return f"""\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{_SG}}} {running}
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{{_SG}}} {queued}
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{{_SG}}} {throughput}
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{{_SG}}} {usage}
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{{{_SG}}} {hit}
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{{_SG}}} NaN
# HELP sglang:max_total_num_tokens Maximum total number of tokens in the KV cache pool.
# TYPE sglang:max_total_num_tokens gauge
sglang:max_total_num_tokens{{{_SG}}} 144870.0
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{{_SGT}}} {prompt}
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{{_SGT}}} 9.0e+04
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{{{_SGT}}} 7.25
{buckets}sglang:time_to_first_token_seconds_count{{{_SGT}}} {ttft[-1]}.0
"""


_VL = 'engine="0",model_name="qwen"'


def vllm_page(*, running: float, waiting: float, kv: float, preempt: float, prompt: float,
              generated: float, ttft: tuple[int, ...]) -> str:
    """vLLM 0.x's page as prometheus_client writes it: counters as ``_total`` with a ``_created``
    gauge after each, the TTFT histogram (six of its buckets), an info gauge."""
    les = ("0.01", "0.1", "0.5", "1.0", "5.0", "+Inf")
    buckets = "".join(f'vllm:time_to_first_token_seconds_bucket{{engine="0",le="{le}",model_name="qwen"}} {n}.0\n'
                      for le, n in zip(les, ttft, strict=True))
    return f"""\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{{_VL}}} {running}
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{{_VL}}} {waiting}
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{{_VL}}} {kv}
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{{_VL}}} {preempt}
# HELP vllm:num_preemptions_created Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{{{_VL}}} 1.7650008e+09
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{{_VL}}} {prompt}
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{{{_VL}}} 1.7650008e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{{_VL}}} {generated}
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{{{_VL}}} 1.7650008e+09
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
{buckets}vllm:time_to_first_token_seconds_count{{{_VL}}} {ttft[-1]}.0
vllm:time_to_first_token_seconds_sum{{{_VL}}} 9.5
# HELP vllm:time_to_first_token_seconds_created Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{{{_VL}}} 1.7650008e+09
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{{block_size="16",cache_dtype="auto",engine="0",num_gpu_blocks="6000"}} 1.0
"""


SG_1 = sglang_page(running=3.0, queued=2.0, throughput=1234.5, usage=0.42, hit=0.25,
                   prompt=1000.0, ttft=(2, 5, 8, 10, 10, 10))
SG_2 = sglang_page(running=5.0, queued=0.0, throughput=1500.0, usage=0.5, hit=0.3,
                   prompt=1600.0, ttft=(2, 7, 14, 18, 20, 20))
# the rank restarted: every counter is back near 0
SG_3 = sglang_page(running=1.0, queued=0.0, throughput=80.0, usage=0.01, hit=0.0,
                   prompt=200.0, ttft=(1, 1, 1, 3, 4, 4))

VL_1 = vllm_page(running=4.0, waiting=9.0, kv=0.875, preempt=2.0, prompt=4000.0,
                 generated=10000.0, ttft=(0, 4, 10, 12, 12, 12))
VL_2 = vllm_page(running=6.0, waiting=1.0, kv=0.9, preempt=3.0, prompt=4500.0,
                 generated=10600.0, ttft=(0, 4, 14, 20, 21, 22))


# -- one page -----------------------------------------------------------------------------------

def test_sglang_page_keeps_the_spec_families_and_skips_nan() -> None:
    scrape = parse_exposition(SG_1, 100.0, SGLANG)
    assert scrape.at == 100.0
    assert scrape.values == {
        "sglang:num_running_reqs": 3.0, "sglang:num_queue_reqs": 2.0,
        "sglang:gen_throughput": 1234.5, "sglang:token_usage": 0.42,
        "sglang:cache_hit_rate": 0.25, "sglang:prompt_tokens": 1000.0}
    # NaN is not known (no key at all); generation_tokens and max_total_num_tokens are not read
    assert scrape.buckets == {"sglang:time_to_first_token_seconds": (
        (0.1, 2.0), (0.25, 5.0), (0.5, 8.0), (1.0, 10.0), (2.5, 10.0), (math.inf, 10.0))}


def test_vllm_page_reads_counters_without_total_and_ignores_created() -> None:
    scrape = parse_exposition(VL_1, 200.0, VLLM)
    assert scrape.values == {
        "vllm:num_requests_running": 4.0, "vllm:num_requests_waiting": 9.0,
        "vllm:kv_cache_usage_perc": 0.875, "vllm:num_preemptions": 2.0,
        "vllm:prompt_tokens": 4000.0, "vllm:generation_tokens": 10000.0}
    assert scrape.buckets["vllm:time_to_first_token_seconds"] == (
        (0.01, 0.0), (0.1, 4.0), (0.5, 10.0), (1.0, 12.0), (5.0, 12.0), (math.inf, 12.0))


def test_label_sets_are_summed_but_tp_replicas_count_once() -> None:
    # two data-parallel vLLM engines add up; SGLang's TP replicas report the same batch
    page = (VL_1 + VL_1.replace('engine="0"', 'engine="1"').replace("6000", "5000")
            .replace("# HELP", "# x").replace("# TYPE", "# y"))
    scrape = parse_exposition(page, 0.0, VLLM)
    assert scrape.values["vllm:num_requests_running"] == 8.0
    # a share is the fullest engine's, not the sum of two (never over 100 %)
    kv = {line.split()[-1] for line in page.splitlines() if line.startswith("vllm:kv_cache_usage_perc")}
    assert scrape.values["vllm:kv_cache_usage_perc"] == max(float(v) for v in kv)
    assert scrape.buckets["vllm:time_to_first_token_seconds"][-1] == (math.inf, 24.0)
    replicas = SG_1 + "".join(line.replace('tp_rank="0"', 'tp_rank="1"') + "\n"
                              for line in SG_1.splitlines() if 'tp_rank="0"' in line)
    assert parse_exposition(replicas, 0.0, SGLANG).values["sglang:num_running_reqs"] == 3.0


def test_a_counter_without_type_lines_is_still_read() -> None:
    spec = MetricsSpec(series=(MetricSeries("prompt_rate", "vllm:prompt_tokens", "rate"),))
    page = 'vllm:prompt_tokens_total{model_name="m"} 5.0\nvllm:prompt_tokens_total{model_name="n"} 2\n'
    assert parse_exposition(page, 0.0, spec).values == {"vllm:prompt_tokens": 7.0}


def test_an_empty_page_is_a_scrape_with_nothing_known() -> None:
    assert parse_exposition("", 1.0, VLLM) == Scrape(at=1.0, values={}, buckets={})


@pytest.mark.parametrize(("page", "says"), [
    ("<html><body><h1>502 Bad Gateway</h1></body></html>\n", "line 1"),
    (VL_1 + 'vllm:num_requests_running{engine="0",model_name="qw',  # truncated
     f"line {VL_1.count(chr(10)) + 1},"),
    (VL_1.replace("vllm:num_requests_waiting{engine=\"0\",model_name=\"qwen\"} 9.0",
                  "vllm:num_requests_waiting{engine=\"0\",model_name=\"qwen\"} nine"), "line 6"),
    ("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 1 2 x\n", "line 2"),
    ("vllm:x 1" + "0" * 400 + "\n", "line 1"),  # an integer no float holds
])
def test_a_malformed_page_is_unreadable_with_a_sentence(page: str, says: str) -> None:
    with pytest.raises(MetricsUnreadable) as caught:
        parse_exposition(page, 0.0, VLLM)
    sentence = str(caught.value)
    assert sentence.startswith("The metrics page is not Prometheus text") and sentence.endswith(".")
    assert says in sentence
    assert len(sentence) < 200  # the bad line is quoted, cut short


def test_a_bucket_without_a_bound_is_unreadable() -> None:
    bad = VL_1.replace('le="0.5"', 'le="half"')
    with pytest.raises(MetricsUnreadable, match=r"vllm:time_to_first_token_seconds .*'half'"):
        parse_exposition(bad, 0.0, VLLM)
    with pytest.raises(MetricsUnreadable, match="no le label"):
        parse_exposition('vllm:time_to_first_token_seconds_bucket{engine="0"} 1\n', 0.0, VLLM)


_PIECES = st.sampled_from([
    "# HELP ", "# TYPE ", " counter", " gauge", " histogram", " summary", "vllm:x", "sglang:y",
    "_total", "_bucket", "_sum", "_count", "{", "}", "=", ",", '"', "\\", 'le="', "+Inf", "NaN",
    " ", "\t", "\n", "\r", "1", "-2.5e3", "1e999", "0x1", "_", "__name__", "#", "vllm:generation_tokens_total",
    "vllm:time_to_first_token_seconds_bucket", "\x00", "é"])


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=200), st.lists(st.one_of(_PIECES, st.text(max_size=5)),
                                                  max_size=40).map("".join)))
def test_any_text_gives_a_scrape_or_metrics_unreadable(text: str) -> None:
    """Nothing but MetricsUnreadable leaves the parser, whatever the page."""
    for spec in (SGLANG, VLLM):
        try:
            scrape = parse_exposition(text, 0.0, spec)
        except MetricsUnreadable as unreadable:
            assert str(unreadable)
        else:
            assert all(math.isfinite(v) for v in scrape.values.values())
            pulse = Pulse(spec)  # and a pulse reads any two such scrapes
            pulse.add(scrape)
            pulse.add(Scrape(scrape.at + 1.0, {}, {}))
            pulse.add(scrape)
            assert set(pulse.values()) == {s.key for s in spec.series}


# -- over time ----------------------------------------------------------------------------------

def test_sglang_pulse_rates_quantiles_and_a_restart() -> None:
    pulse = Pulse(SGLANG)
    pulse.add(parse_exposition(SG_1, 100.0, SGLANG))
    first = pulse.values()
    assert first["running"] == 3.0 and first["queued"] == 2.0 and first["throughput"] == 1234.5
    assert first["kv_use"] == pytest.approx(42.0) and first["cache_hit"] == pytest.approx(25.0)
    assert first["accept"] is None  # NaN on the page
    # one scrape: no rate, and the histogram's counts since the start are not "the window"
    assert first["prompt_rate"] is None and first["ttft_p50"] is None and first["ttft_p95"] is None

    pulse.add(parse_exposition(SG_2, 110.0, SGLANG))
    second = pulse.values()
    assert second["prompt_rate"] == pytest.approx(60.0)  # (1600 - 1000) / 10 s
    # observations in the window, per bucket: 0.1: 0, 0.25: 2, 0.5: 6, 1.0: 8, 2.5: 10, +Inf: 10
    # p50: rank 5 falls in (0.25, 0.5], 4 observations there, 2 below: 0.25 + 0.25 * 3/4
    assert second["ttft_p50"] == pytest.approx(0.4375)
    # p95: rank 9.5 in (1.0, 2.5], 2 there, 8 below: 1.0 + 1.5 * 1.5/2
    assert second["ttft_p95"] == pytest.approx(2.125)

    pulse.add(parse_exposition(SG_3, 120.0, SGLANG))  # restarted: counters went down
    third = pulse.values()
    assert third["prompt_rate"] == pytest.approx(20.0)  # its new value is the increase: 200 / 10 s
    # the histogram since the restart (the newest reading): 1, 1, 1, 3, 4, 4
    # p50: rank 2 in (0.5, 1.0], 2 there, 1 below: 0.5 + 0.5 * 1/2
    assert third["ttft_p50"] == pytest.approx(0.75)
    # p95: rank 3.8 in (1.0, 2.5], 1 there, 3 below: 1.0 + 1.5 * 0.8
    assert third["ttft_p95"] == pytest.approx(2.2)
    assert third["running"] == 1.0 and third["kv_use"] == pytest.approx(1.0)
    assert pulse.history("prompt_rate") == pytest.approx([60.0, 20.0])
    assert pulse.history("running") == [3.0, 5.0, 1.0]
    assert pulse.history("accept") == []


def test_vllm_pulse_throughput_is_the_generation_rate() -> None:
    pulse = Pulse(VLLM)
    pulse.add(parse_exposition(VL_1, 200.0, VLLM))
    pulse.add(parse_exposition(VL_2, 205.0, VLLM))
    values = pulse.values()
    assert set(values) == {"throughput", "running", "queued", "kv_use", "ttft_p50", "ttft_p95",
                           "prompt_rate", "preemptions"}
    assert values["throughput"] == pytest.approx(120.0)  # (10600 - 10000) / 5 s
    assert values["prompt_rate"] == pytest.approx(100.0)  # 500 / 5 s
    assert values["preemptions"] == pytest.approx(0.2)  # 1 / 5 s
    assert values["running"] == 6.0 and values["queued"] == 1.0
    assert values["kv_use"] == pytest.approx(90.0)
    # window: 0.01: 0, 0.1: 0, 0.5: 4, 1.0: 8, 5.0: 9, +Inf: 10
    # p50: rank 5 in (0.5, 1.0], 4 there, 4 below: 0.5 + 0.5 * 1/4
    assert values["ttft_p50"] == pytest.approx(0.625)
    # p95: rank 9.5 falls in +Inf: the highest finite bound, as histogram_quantile says
    assert values["ttft_p95"] == 5.0


def _ttft(at: float, counts: tuple[float, ...]) -> Scrape:
    les = (0.1, 1.0, math.inf)
    return Scrape(at=at, values={}, buckets={"vllm:time_to_first_token_seconds":
                                             tuple(zip(les, counts, strict=True))})


def test_quantiles_cover_the_window_only() -> None:
    pulse = Pulse(VLLM, window_s=60.0)
    pulse.add(_ttft(0.0, (0, 0, 0)))
    pulse.add(_ttft(30.0, (10, 10, 10)))  # 10 fast
    pulse.add(_ttft(60.0, (10, 20, 20)))  # 10 slower
    # 20 in the window from 0: p50 rank 10 is the last of (0, 0.1]: 0.1
    assert pulse.values()["ttft_p50"] == pytest.approx(0.1)
    pulse.add(_ttft(90.0, (10, 26, 26)))
    # from 30 (the oldest within 60 s): 0, 16, 16: rank 8 in (0.1, 1.0]: 0.1 + 0.9 * 8/16
    assert pulse.values()["ttft_p50"] == pytest.approx(0.55)
    pulse.add(_ttft(150.0, (10, 26, 26)))  # nothing new since 90
    assert pulse.values()["ttft_p50"] is None
    assert pulse.values()["ttft_p95"] is None


def test_a_scrape_interval_longer_than_the_window_reads_the_last_two() -> None:
    pulse = Pulse(VLLM, window_s=5.0)
    pulse.add(_ttft(0.0, (0, 0, 0)))
    pulse.add(_ttft(30.0, (0, 4, 4)))
    assert pulse.values()["ttft_p50"] == pytest.approx(0.55)  # rank 2 of 4 in (0.1, 1.0]


def test_a_failed_scrape_keeps_the_last_values_and_says_why() -> None:
    pulse = Pulse(VLLM)
    pulse.add(parse_exposition(VL_1, 200.0, VLLM))
    pulse.add(parse_exposition(VL_2, 205.0, VLLM))
    before = pulse.values()
    assert pulse.stale is None and pulse.last_ok == 205.0
    with pytest.raises(MetricsUnreadable) as caught:
        parse_exposition(VL_2[:len(VL_2) // 2] + "{oops\n", 210.0, VLLM)
    pulse.fail(str(caught.value), 210.0)
    assert pulse.stale == str(caught.value)
    assert pulse.stale.startswith("The metrics page is not Prometheus text")
    assert pulse.values() == before and pulse.last_ok == 205.0
    assert pulse.history("running") == [4.0, 6.0]  # a failure adds nothing to the sparkline
    pulse.fail("connection refused", 215.0)
    assert pulse.stale == "connection refused"
    pulse.add(parse_exposition(VL_2, 220.0, VLLM))  # the next good one: fresh again
    assert pulse.stale is None and pulse.last_ok == 220.0
    # the rate is over the 15 s since the last good scrape: nothing generated
    assert pulse.values()["throughput"] == 0.0


def test_history_keeps_at_most_keep() -> None:
    pulse = Pulse(SGLANG, keep=2)
    for at, running in ((0.0, 1.0), (5.0, 2.0), (10.0, 7.0)):
        pulse.add(Scrape(at=at, values={"sglang:num_running_reqs": running}, buckets={}))
    assert pulse.history("running") == [2.0, 7.0]


def test_histogram_quantile_edges() -> None:
    inf = math.inf
    assert quantile(0.5, ((1.0, 0.0), (inf, 0.0))) is None  # no observation
    assert quantile(0.5, ((1.0, 3.0), (2.0, 4.0))) is None  # no +Inf: the total is not known
    assert quantile(0.5, ((1.0, 4.0), (inf, 4.0))) == pytest.approx(0.5)  # from 0 to 1.0
    assert quantile(0.5, ((-1.0, 4.0), (inf, 4.0))) == -1.0  # a first bound <= 0 is the answer
    assert quantile(0.9, ((1.0, 1.0), (inf, 10.0))) == 1.0  # in +Inf: the highest finite bound
    # counts that go down from one bound to the next are made non-decreasing (as Prometheus
    # does): 2, 2, 8, 8; rank 4 in (2.0, 3.0], 6 there, 2 below: 2.0 + 1.0 * 2/6
    assert quantile(0.5, ((1.0, 2.0), (2.0, 1.0), (3.0, 8.0), (inf, 8.0))) == pytest.approx(2 + 1 / 3)


# -- the group and the screen -------------------------------------------------------------------

def test_group_sums_what_adds_up_and_takes_the_worst_of_levels() -> None:
    a, b, silent = Pulse(VLLM), Pulse(VLLM), Pulse(VLLM)
    a.add(parse_exposition(VL_1, 200.0, VLLM))
    a.add(parse_exposition(VL_2, 205.0, VLLM))
    b.add(parse_exposition(VL_1.replace("} 0.875", "} 0.5").replace("} 4.0", "} 2.0"), 201.0, VLLM))
    group = group_values([a, b, silent])
    assert list(group) == [k for k in PULSE_KEYS if k in a.values()]  # display order
    assert group["running"] == 8.0  # 6 + 2
    assert group["queued"] == 10.0  # 1 + 9
    assert group["kv_use"] == pytest.approx(90.0)  # max(90, 50)
    assert group["throughput"] == pytest.approx(120.0)  # b has no rate yet: a's alone
    assert group["ttft_p50"] == pytest.approx(0.625)
    assert group_values([silent])["running"] is None
    assert group_values([]) == {}


def test_levels_colour_only_keys_with_thresholds() -> None:
    assert level("kv_use", 50.0) == "ok"
    assert level("kv_use", 85.0) == "warn"
    assert level("kv_use", 97.0) == "bad"
    assert level("queued", 0.0) == "ok" and level("queued", 1.0) == "warn"
    assert level("queued", 8.0) == "bad"
    assert level("ttft_p95", 1.9) == "ok" and level("ttft_p95", 4.0) == "warn"
    assert level("preemptions", 0.0) == "ok" and level("preemptions", 2.0) == "bad"
    assert level("kv_use", None) == "none"
    assert "throughput" not in THRESHOLDS and level("throughput", 1e9) == "none"
    assert all(warn < bad for warn, bad in THRESHOLDS.values())


def test_shown_values() -> None:
    assert shown("throughput", 1234.5) == "1.2k tok/s"
    assert shown("throughput", 850.4) == "850 tok/s"
    assert shown("prompt_rate", 23456.0) == "23k tok/s"
    assert shown("prompt_rate", 0.4) == "0.4 tok/s"
    assert shown("running", 3.0) == "3"
    assert shown("kv_use", 87.2) == "87 %"
    assert shown("ttft_p95", 0.4237) == "0.42 s"
    assert shown("ttft_p50", 12.34) == "12.3 s"
    assert shown("preemptions", 0.2) == "0.20/s"
    assert shown("accept", 2.314) == "2.31"
    assert shown("running", None) == "-"
    assert set(LABELS) == set(PULSE_KEYS)
    assert LABELS["throughput"] == "gen" and LABELS["kv_use"] == "KV use"


# -- the adapters -------------------------------------------------------------------------------

def test_adapters_name_each_key_once_and_only_real_keys() -> None:
    for spec in (SGLANG, VLLM):
        keys = [s.key for s in spec.series]
        assert len(keys) == len(set(keys)) and set(keys) <= set(PULSE_KEYS)
        assert spec.path == "/metrics"
    assert SGLANG.flag == "--enable-metrics" and VLLM.flag is None
    assert {s.family for s in SGLANG.series} <= {f for f in _families(SG_1)}
    assert {s.family for s in VLLM.series} <= {f for f in _families(VL_1)}


def _families(page: str) -> set[str]:
    """Family names as the parser gives them (a counter without ``_total``)."""
    from prometheus_client.parser import text_string_to_metric_families
    return {f.name for f in text_string_to_metric_families(page)}


def test_who_serves_metrics() -> None:
    sglang, vllm = engine("sglang"), engine("vllm")
    assert [sglang.serves_metrics(r, 4, "mp") for r in range(4)] == [True, False, False, False]
    assert [vllm.serves_metrics(r, 4, "mp") for r in range(4)] == [True, False, False, False]
    assert vllm.serves_metrics(0, 1, "mp") and sglang.serves_metrics(0, 1, "mp")
