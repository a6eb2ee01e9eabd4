#!/usr/bin/env python3
"""The Kalman fit's chi2/ndf of a reconstruction's track candidates, true against fake (issue 40).

Usage: tools/chi2_candidates.py EVENTS_DIR TRACKS_DIR [TRACKS_DIR ...]

EVENTS_DIR holds the events' truth files (`eventN-truth.csv`); each TRACKS_DIR is the output of
`trackgnn reconstruct --fit` (`eventN-submission.csv` and `eventN-parameters.csv`). A candidate
is a fitted track; it is fake when no particle holds more than half of its hits (noise hits count
as nobody's), as the candidate-quality model labels them. Prints, per TRACKS_DIR, the quantiles
of chi2/ndf for true and fake candidates, and what cuts on chi2/ndf would remove: the fraction of
fakes and of true candidates above each cut, and the fake rate left.
Standard library only.
"""
import csv
import glob
import os
import sys
from collections import Counter, defaultdict


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def candidates(events_dir, tracks_dir):
    """(chi2/ndf, is_fake, hits) of every fitted candidate of the directory."""
    out = []
    for sub in sorted(glob.glob(os.path.join(tracks_dir, "event*-submission.csv"))):
        prefix = os.path.basename(sub)[: -len("-submission.csv")]
        params = os.path.join(tracks_dir, prefix + "-parameters.csv")
        truth = os.path.join(events_dir, prefix + "-truth.csv")
        if not os.path.exists(params):
            sys.exit(f"{params}: missing (reconstruct with --fit)")
        particle = {r["hit_id"]: r["particle_id"] for r in read_rows(truth)}
        hits = defaultdict(list)
        for r in read_rows(sub):
            hits[r["track_id"]].append(particle.get(r["hit_id"], "0"))
        for r in read_rows(params):
            ndf = float(r["ndf"])
            if ndf <= 0:
                continue
            owners = hits[r["track_id"]]
            top, n = Counter(p for p in owners if p != "0").most_common(1)[0] if any(p != "0" for p in owners) else ("0", 0)
            out.append((float(r["chi2"]) / ndf, 2 * n <= len(owners), len(owners)))
    return out


def quantiles(values, qs=(0.1, 0.25, 0.5, 0.75, 0.9, 0.99)):
    v = sorted(values)
    return [v[min(len(v) - 1, int(q * len(v)))] for q in qs] if v else []


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    events_dir = sys.argv[1]
    for tracks_dir in sys.argv[2:]:
        c = candidates(events_dir, tracks_dir)
        true = [x for x, fake, _ in c if not fake]
        fake = [x for x, fake, _ in c if fake]
        print(f"{tracks_dir}: {len(c)} fitted candidates, {len(fake)} fake ({len(fake) / max(1, len(c)):.4f})")
        print("  chi2/ndf quantiles" + "".join(f"{q:>9}" for q in ("10%", "25%", "50%", "75%", "90%", "99%")))
        for name, v in (("true", true), ("fake", fake)):
            print(f"  {name:<18}" + "".join(f"{q:9.2f}" for q in quantiles(v)))
        print("  cut: chi2/ndf >  fakes removed  true removed  fake rate left")
        for cut in (2, 3, 5, 10, 20, 50):
            fr = sum(x > cut for x in fake) / max(1, len(fake))
            tr = sum(x > cut for x in true) / max(1, len(true))
            left_f = sum(x <= cut for x in fake)
            left = left_f + sum(x <= cut for x in true)
            print(f"  {cut:>14}  {fr:13.4f}  {tr:12.4f}  {left_f / max(1, left):14.4f}")


if __name__ == "__main__":
    main()
