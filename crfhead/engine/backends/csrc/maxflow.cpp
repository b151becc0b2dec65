// Boykov-Kolmogorov maximum flow with search-tree reuse, for the pattern slave of the 2-slave dual
// decomposition (crfhead.higher_order; Qian & Liu, TACL 2014). Loaded by
// crfhead/higher_order/native_maxflow.py through ctypes; the decisions are explained there.
//
// Algorithm: Y. Boykov and V. Kolmogorov, "An experimental comparison of min-cut/max-flow algorithms
// for energy minimization in vision", PAMI 2004; the reuse of the search trees when only terminal
// capacities change: P. Kohli and P. Torr, "Dynamic graph cuts", PAMI 2007, in the form of
// Kolmogorov's maxflow-v3 (maxflow_reuse_trees_init). Written from the papers, not a copy.
//
// The graph: nodes 0..n-1, pairwise arcs in sister pairs (2e: u->v, 2e+1: v->u), and one signed
// terminal capacity per node (w > 0: an arc s->u of capacity w, w < 0: u->t of capacity -w); the
// residual keeps the same form (tr). A node is on the sink side (x = 1) unless it is in the source
// search tree at the end, which is then exactly the set reachable from s in the residual graph: the
// same (smallest source side) minimum cut whatever maximum flow was found.
//
// Capacities are float64. The flow is never read back as a number: crfhead_mf_solve returns the
// residual's parts from which the caller proves its bound (see native_maxflow.py).

#include <cstdint>
#include <cmath>
#include <deque>
#include <limits>
#include <vector>

namespace {

constexpr int NONE = -1;      // a free node (in neither tree)
constexpr int TERMINAL = -2;  // the parent is the terminal of the node's tree
constexpr int ORPHAN = -3;
constexpr int INF_D = std::numeric_limits<int>::max();

struct Graph {
  int n = 0;
  std::vector<int> first, parent, next, ts, dist;
  std::vector<char> is_sink, marked;
  std::vector<double> tr, w;       // residual and given terminal capacities (signed)
  std::vector<int> head, nxt;      // per arc
  std::vector<double> cap, rcap;   // given and residual capacities per arc
  int queue_first[2] = {NONE, NONE}, queue_last[2] = {NONE, NONE};
  std::deque<int> orphans;
  int time = 0;
  bool fresh = true;

  void set_active(int i) {
    if (next[i] == NONE) {
      if (queue_last[1] != NONE) next[queue_last[1]] = i; else queue_first[1] = i;
      queue_last[1] = i;
      next[i] = i;
    }
  }

  int next_active() {
    for (;;) {
      int i = queue_first[0];
      if (i == NONE) {
        queue_first[0] = i = queue_first[1];
        queue_last[0] = queue_last[1];
        queue_first[1] = queue_last[1] = NONE;
        if (i == NONE) return NONE;
      }
      if (next[i] == i) queue_first[0] = queue_last[0] = NONE; else queue_first[0] = next[i];
      next[i] = NONE;
      if (parent[i] != NONE) return i;
    }
  }

  void orphan_front(int i) { parent[i] = ORPHAN; orphans.push_front(i); }
  void orphan_rear(int i) { parent[i] = ORPHAN; orphans.push_back(i); }

  void init_fresh() {
    queue_first[0] = queue_last[0] = queue_first[1] = queue_last[1] = NONE;
    orphans.clear();
    time = 0;
    for (std::size_t a = 0; a < cap.size(); ++a) rcap[a] = cap[a];
    for (int i = 0; i < n; ++i) {
      next[i] = NONE;
      marked[i] = 0;
      ts[i] = time;
      tr[i] = w[i];
      if (tr[i] > 0) { is_sink[i] = 0; parent[i] = TERMINAL; set_active(i); dist[i] = 1; }
      else if (tr[i] < 0) { is_sink[i] = 1; parent[i] = TERMINAL; set_active(i); dist[i] = 1; }
      else { parent[i] = NONE; }
    }
  }

  // The nodes whose terminal capacity changed (marked) are re-rooted at their terminal, the subtrees
  // they cut off become orphans and are adopted, the rest of both trees is kept.
  void init_reuse(const std::vector<int>& changed) {
    queue_first[0] = queue_last[0] = queue_first[1] = queue_last[1] = NONE;
    orphans.clear();
    ++time;
    for (int i : changed) marked[i] = 1;
    for (int i : changed) {
      marked[i] = 0;
      set_active(i);
      if (tr[i] == 0) {
        if (parent[i] != NONE) orphan_rear(i);
        continue;
      }
      if (tr[i] > 0) {
        if (parent[i] == NONE || is_sink[i]) {
          is_sink[i] = 0;
          for (int a = first[i]; a != NONE; a = nxt[a]) {
            int j = head[a];
            if (!marked[j]) {
              if (parent[j] == (a ^ 1)) orphan_rear(j);
              if (parent[j] != NONE && is_sink[j] && rcap[a] > 0) set_active(j);
            }
          }
        }
      } else {
        if (parent[i] == NONE || !is_sink[i]) {
          is_sink[i] = 1;
          for (int a = first[i]; a != NONE; a = nxt[a]) {
            int j = head[a];
            if (!marked[j]) {
              if (parent[j] == (a ^ 1)) orphan_rear(j);
              if (parent[j] != NONE && !is_sink[j] && rcap[a ^ 1] > 0) set_active(j);
            }
          }
        }
      }
      parent[i] = TERMINAL;
      ts[i] = time;
      dist[i] = 1;
    }
    adopt();
  }

  void augment(int middle) {
    double bottleneck = rcap[middle];
    int i, a;
    for (i = head[middle ^ 1];; i = head[a]) {  // the source side, up to s
      a = parent[i];
      if (a == TERMINAL) break;
      if (bottleneck > rcap[a ^ 1]) bottleneck = rcap[a ^ 1];
    }
    if (bottleneck > tr[i]) bottleneck = tr[i];
    for (i = head[middle];; i = head[a]) {  // the sink side, down to t
      a = parent[i];
      if (a == TERMINAL) break;
      if (bottleneck > rcap[a]) bottleneck = rcap[a];
    }
    if (bottleneck > -tr[i]) bottleneck = -tr[i];

    rcap[middle ^ 1] += bottleneck;
    rcap[middle] -= bottleneck;
    for (i = head[middle ^ 1];; i = head[a]) {
      a = parent[i];
      if (a == TERMINAL) break;
      rcap[a] += bottleneck;
      rcap[a ^ 1] -= bottleneck;
      if (rcap[a ^ 1] == 0) orphan_front(i);
    }
    tr[i] -= bottleneck;
    if (tr[i] == 0) orphan_front(i);
    for (i = head[middle];; i = head[a]) {
      a = parent[i];
      if (a == TERMINAL) break;
      rcap[a ^ 1] += bottleneck;
      rcap[a] -= bottleneck;
      if (rcap[a] == 0) orphan_front(i);
    }
    tr[i] += bottleneck;
    if (tr[i] == 0) orphan_front(i);
  }

  // The length of j's path to its terminal (INF_D when it ends at an orphan), marking it for this time.
  int origin(int j) {
    int d = 0;
    for (;;) {
      if (ts[j] == time) { d += dist[j]; break; }
      int a = parent[j];
      ++d;
      if (a == TERMINAL) { ts[j] = time; dist[j] = 1; break; }
      if (a == ORPHAN) { d = INF_D; break; }
      j = head[a];
    }
    return d;
  }

  void process_orphan(int i, bool sink) {
    int a0_min = NONE, d_min = INF_D;
    for (int a0 = first[i]; a0 != NONE; a0 = nxt[a0]) {
      bool open = sink ? rcap[a0] > 0 : rcap[a0 ^ 1] > 0;
      int j = head[a0];
      if (!open || bool(is_sink[j]) != sink || parent[j] == NONE) continue;
      int d = origin(j);
      if (d < INF_D) {
        if (d < d_min) { a0_min = a0; d_min = d; }
        for (j = head[a0]; ts[j] != time; j = head[parent[j]]) { ts[j] = time; dist[j] = d--; }
      }
    }
    parent[i] = a0_min;
    if (a0_min != NONE) {
      ts[i] = time;
      dist[i] = d_min + 1;
      return;
    }
    for (int a0 = first[i]; a0 != NONE; a0 = nxt[a0]) {
      int j = head[a0];
      int a = parent[j];
      if (bool(is_sink[j]) != sink || a == NONE) continue;
      if (sink ? rcap[a0] > 0 : rcap[a0 ^ 1] > 0) set_active(j);
      if (a != TERMINAL && a != ORPHAN && head[a] == i) orphan_rear(j);
    }
  }

  void adopt() {
    while (!orphans.empty()) {
      int i = orphans.front();
      orphans.pop_front();
      process_orphan(i, is_sink[i] != 0);
    }
  }

  void run() {
    int current = NONE;
    for (;;) {
      int i = current;
      if (i != NONE) {
        next[i] = NONE;
        if (parent[i] == NONE) i = NONE;
      }
      if (i == NONE) {
        i = next_active();
        if (i == NONE) break;
      }
      int found = NONE;
      if (!is_sink[i]) {
        for (int a = first[i]; a != NONE; a = nxt[a]) {
          if (!(rcap[a] > 0)) continue;
          int j = head[a];
          if (parent[j] == NONE) {
            is_sink[j] = 0; parent[j] = a ^ 1; ts[j] = ts[i]; dist[j] = dist[i] + 1; set_active(j);
          } else if (is_sink[j]) {
            found = a;
            break;
          } else if (ts[j] <= ts[i] && dist[j] > dist[i]) {
            parent[j] = a ^ 1; ts[j] = ts[i]; dist[j] = dist[i] + 1;
          }
        }
      } else {
        for (int a = first[i]; a != NONE; a = nxt[a]) {
          if (!(rcap[a ^ 1] > 0)) continue;
          int j = head[a];
          if (parent[j] == NONE) {
            is_sink[j] = 1; parent[j] = a ^ 1; ts[j] = ts[i]; dist[j] = dist[i] + 1; set_active(j);
          } else if (!is_sink[j]) {
            found = a ^ 1;
            break;
          } else if (ts[j] <= ts[i] && dist[j] > dist[i]) {
            parent[j] = a ^ 1; ts[j] = ts[i]; dist[j] = dist[i] + 1;
          }
        }
      }
      ++time;
      if (found != NONE) {
        next[i] = i;  // i stays the current node: it may have more paths
        current = i;
        augment(found);
        adopt();
      } else {
        current = NONE;
      }
    }
  }
};

}  // namespace

extern "C" {

int crfhead_mf_abi_version() { return 1; }

// A graph over n nodes with m sister pairs of arcs u[e] -> v[e] (capacity cuv[e]) and back (cvu[e]).
void* crfhead_mf_new(int64_t n, int64_t m, const int64_t* u, const int64_t* v, const double* cuv,
                     const double* cvu) {
  Graph* g = new Graph();
  g->n = int(n);
  g->first.assign(n, NONE);
  g->parent.assign(n, NONE);
  g->next.assign(n, NONE);
  g->ts.assign(n, 0);
  g->dist.assign(n, 0);
  g->is_sink.assign(n, 0);
  g->marked.assign(n, 0);
  g->tr.assign(n, 0.0);
  g->w.assign(n, 0.0);
  g->head.resize(2 * m);
  g->nxt.resize(2 * m);
  g->cap.resize(2 * m);
  g->rcap.resize(2 * m);
  for (int64_t e = 0; e < m; ++e) {
    int a = int(2 * e), b = a + 1;
    int from = int(u[e]), to = int(v[e]);
    g->head[a] = to; g->nxt[a] = g->first[from]; g->first[from] = a; g->cap[a] = cuv[e];
    g->head[b] = from; g->nxt[b] = g->first[to]; g->first[to] = b; g->cap[b] = cvu[e];
  }
  g->rcap = g->cap;
  return g;
}

void crfhead_mf_free(void* graph) { delete static_cast<Graph*>(graph); }

// Every capacity (given and residual, pairwise and terminal) times r > 0: the flow scaled by r is
// a flow of the scaled graph with the same residual signs, so both search trees stay valid.
void crfhead_mf_scale(void* graph, double r) {
  Graph* g = static_cast<Graph*>(graph);
  for (auto& c : g->cap) c *= r;
  for (auto& c : g->rcap) c *= r;
  for (auto& c : g->tr) c *= r;
  for (auto& c : g->w) c *= r;
}

// The maximum flow with terminal capacities w (n,), from the previous flow and trees when reuse is
// non-zero and the graph has been solved before (only the nodes whose w changed are revisited).
// Writes x (n,) (1: sink side) and parts (3,): the residual sink capacity sum_u max(0, -tr_u); the
// imbalance sum_u max(0, -e_u) + sum_pairs max(0, p_a + p_b) of the flow read back from the
// residual (0 in exact arithmetic; see native_maxflow.py); and the magnitude of the sums, for the
// round-off slack. Returns the number of nodes revisited (n on a fresh start).
int64_t crfhead_mf_solve(void* graph, const double* w, uint8_t* x, double* parts, int reuse) {
  Graph* g = static_cast<Graph*>(graph);
  const int n = g->n;
  int64_t visited = n;
  if (!reuse || g->fresh) {
    for (int i = 0; i < n; ++i) g->w[i] = w[i];
    g->init_fresh();
    g->fresh = false;
  } else {
    std::vector<int> changed;
    for (int i = 0; i < n; ++i) {
      if (w[i] != g->w[i]) {
        g->tr[i] += w[i] - g->w[i];
        g->w[i] = w[i];
        changed.push_back(i);
      }
    }
    visited = int64_t(changed.size());
    g->init_reuse(changed);
  }
  g->run();
  std::vector<double> excess(n);
  double sink_left = 0.0, imbalance = 0.0, magnitude = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = (g->parent[i] != NONE && !g->is_sink[i]) ? 0 : 1;
    excess[i] = g->w[i] - g->tr[i];
    sink_left += std::fmax(0.0, -g->tr[i]);
    magnitude += std::fabs(g->w[i]) + std::fabs(g->tr[i]);
  }
  const std::size_t arcs = g->cap.size();
  for (std::size_t a = 0; a < arcs; a += 2) {
    double p = g->cap[a] - g->rcap[a], q = g->cap[a + 1] - g->rcap[a + 1];
    excess[g->head[a]] += p;
    excess[g->head[a + 1]] += q;
    imbalance += std::fmax(0.0, p + q);
    magnitude += g->cap[a] + g->cap[a + 1] + std::fabs(g->rcap[a]) + std::fabs(g->rcap[a + 1]);
  }
  for (int i = 0; i < n; ++i) imbalance += std::fmax(0.0, -excess[i]);
  parts[0] = sink_left;
  parts[1] = imbalance;
  parts[2] = magnitude;
  return visited;
}

}  // extern "C"
