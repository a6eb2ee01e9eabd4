"""Reads a held-out event of `trackgnn demo` into pandas, builds its graph, scores it with the
demo's run and prints the track efficiency. Usage: python track_efficiency.py DEMO_DIR"""
import sys
import trackgnn

demo = sys.argv[1] if len(sys.argv) > 1 else "trackgnn-demo"
hits, cells, particles, truth = trackgnn.load_event(f"{demo}/heldout/event000001001")
print(f"{len(hits)} hits, {truth.particle_id[truth.particle_id != 0].nunique()} particles")
event = trackgnn.Event.from_columns(1001, hits, truth, particles, cells)
run = trackgnn.Run(f"{demo}/run", method="follow", min_hits=5)  # as `trackgnn demo` reconstructs
graph = run.build_graph(event)
scores = run.score(graph)
print(f"graph: {graph.num_nodes} nodes, {graph.num_edges} edges, {(scores > 0.5).sum()} scored > 0.5")
print("edge metrics:", {k: round(v, 4) for k, v in trackgnn.edge_metrics(graph, run.logits(graph)).items()})
tracks = run.tracks(event, graph, scores)
m = trackgnn.track_metrics(event, tracks)
print(f"{m['n_candidates']} tracks; track efficiency {m['efficiency']:.4f} "
      f"({m['n_target_matched']} of {m['n_target_particles']} target particles), fake rate {m['fake_rate']:.4f}")
