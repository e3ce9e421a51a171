"""The monitor's words: one name per concept, and what every abbreviation and marker on screen means.

Contract: :data:`GLOSSARY` is what ``?`` shows under the keys; each term is spelled exactly as the
screens spell it (a column header, a marker, a badge), and a concept has one spelling everywhere:
the monitor, ``report``, the help and the README (``tests/tui/test_vocabulary.py`` holds both to it).
Fractions are shown as percentages everywhere a person reads them (``report``'s JSON keeps fractions).
"""

from __future__ import annotations

GLOSSARY: tuple[tuple[str, str], ...] = (
    ("lpΔ", "train log-prob − rollout log-prob of a token (the train/rollout mismatch)"),
    ("|lpΔ|  max|lpΔ|", "its absolute value: a sample's mean over trained tokens, and its largest"),
    ("ratio", "importance ratio exp(lpΔ); a sample's mean over trained tokens (mean ratio)"),
    ("zero-std", "a group whose rewards are all equal: no spread, so no policy gradient (GRPO)"),
    ("stale", "staleness: policy versions between the rollout's weights and the trainer's"),
    ("version", "weight version the sample was generated with (v3–v5: its turns spanned several)"),
    ("mixed", "a sample whose turns ran on more than one weight version"),
    ("''  ''*", "an empty weight version as dumped (* : mixed with an unreadable one)"),
    ("entropy", "mean token entropy of the response (maxH: its largest token entropy)"),
    ("maxH", "the largest token entropy of the response"),
    ("adv  adv σ", "mean advantage over trained tokens, and its standard deviation"),
    ("return", "mean return over trained tokens"),
    ("raw  norm", "raw reward, and the reward as normalized within its group"),
    ("resp  total", "response length, and prompt + response length, in tokens"),
    ("trunc", "truncated: the response hit the length cap (the percentage of a step's samples)"),
    ("spec", "speculative-decoding acceptance rate of the sample"),
    ("cache", "prefix-cache hit rate of the sample"),
    ("ngen s", "seconds the sample spent outside generation (tools, reward)"),
    ("rank", "global rank of the lowest-ranked train file holding the sample"),
    ("per-token", "whether the sample's per-token train data could be read (UNREADABLE: dumped, not placed)"),
    ("✗ removed", "the rollout removed the sample from training"),
    ("σ  Δ  A/B", "standard deviation; B − A; the two steps compared"),
    ("slot", "compare: a group number, which restarts each step (the same slot is not the same prompt)"),
    ("–", "no such value in the dump (never zero)"),
    ("UNREAD", "a value the dump has but that could not be read or placed"),
    ("…", "a value too wide for its cell, or text cut at its end (a number is never cut)"),
    ("‹  ›", "columns hidden to the left / right: ← → scroll a whole column"),
    ("▲  ▼", "the column the rows are sorted by, ascending / descending"),
    ("×  ◆", "scatter: a truncated sample; the cursor (a digit: that many samples in one cell)"),
    ("● LIVE", "new data keeps coming at the run's own pace"),
    ("○ QUIET since", "no new data for a few of the run's step intervals (the time is its newest record's)"),
    ("■ ENDED", "the run reached its last step (num_rollout) with every phase closed"),
    ("■ STATIC", "read once (--no-follow): the monitor does not poll"),
    ("‖ PAUSED", "tracking off (f): new steps land without moving the views"),
    ("✗ NOT A DUMP", "the folder has none of rollout_data/, train_data/, dashboard/"),
    ("track (f)", "move the views to each new step as it lands; f turns it off and on"),
    ("MFU", "model FLOPs utilisation: actor train TFLOP/s over the device peak (mean: the steps after the first)"),
    ("wait  wait/step", "share of a rollout step training waited for data (miles' perf/wait_time_ratio)"),
    ("buffer", "groups queued in the rollout data buffer (data_buffer.jsonl), as miles reports them"),
    ("[CRIT] [WARN] [INFO]", "advisory levels; 'cleared at step N': an advisory that no longer holds"),
)
"""(term as shown, meaning)."""
