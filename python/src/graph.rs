//! Graphs: [`PyRecipe`] (`trackgnn.Recipe`, how an event becomes a graph), [`PyGraph`]
//! (`trackgnn.Graph`, arrays in the PyTorch Geometric layout), building them with
//! `trackgnn_graph::build_graph` and reading and writing graph files.

use std::path::PathBuf;

use numpy::{Element, PyArray1, PyArray2, PyArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use trackgnn_graph::{
    Graph, GraphMethod, GraphRecipe, ModuleMap, build_graph as build, read_graph as read, write_graph as write,
};

use crate::errors::{config_error, to_py};
use crate::event::{PyEvent, detector};

/// How an event becomes a graph (`trackgnn.Recipe`): the `recipe.toml` of a graph directory
/// or a run, or the defaults of a method.
#[pyclass(name = "Recipe", module = "trackgnn", frozen)]
#[derive(Clone)]
pub struct PyRecipe {
    /// The recipe.
    pub recipe: GraphRecipe,
}

#[pymethods]
impl PyRecipe {
    /// The default recipe of `method`: `geometric` or `module-map` (which then needs a
    /// `module_map` file when building).
    #[new]
    #[pyo3(signature = (method="geometric"))]
    fn new(method: &str) -> PyResult<PyRecipe> {
        let method = match method {
            "geometric" => GraphMethod::Geometric,
            "module-map" => GraphMethod::ModuleMap,
            other => return Err(config_error(format!("unknown graph method `{other}` (geometric or module-map)"))),
        };
        Ok(PyRecipe { recipe: GraphRecipe::new(method) })
    }

    /// A recipe TOML file (`recipe.toml` of a graph directory or run; the keys of
    /// `GraphRecipe`).
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<PyRecipe> {
        let text = std::fs::read_to_string(&path).map_err(|e| to_py(trackgnn_trackml::Error::io(&path, e)))?;
        toml::from_str(&text)
            .map(|recipe| PyRecipe { recipe })
            .map_err(|e| config_error(format!("{}: invalid graph recipe: {e}", path.display())))
    }

    /// A recipe from TOML text.
    #[staticmethod]
    fn from_toml(text: &str) -> PyResult<PyRecipe> {
        toml::from_str(text)
            .map(|recipe| PyRecipe { recipe })
            .map_err(|e| config_error(format!("invalid graph recipe: {e}")))
    }

    /// The recipe as TOML text (what `trackgnn build-graphs` writes as `recipe.toml`).
    fn to_toml(&self) -> PyResult<String> {
        toml::to_string(&self.recipe).map_err(|e| config_error(e.to_string()))
    }

    /// The recipe inference uses: the same, without truth-based node cuts.
    fn for_inference(&self) -> PyRecipe {
        PyRecipe { recipe: self.recipe.for_inference() }
    }

    /// `geometric`, `module-map`, `metric-learning` or `hybrid`.
    #[getter]
    fn method(&self) -> &'static str {
        match self.recipe.method {
            GraphMethod::Geometric => "geometric",
            GraphMethod::ModuleMap => "module-map",
            GraphMethod::MetricLearning => "metric-learning",
            GraphMethod::Hybrid => "hybrid",
        }
    }

    /// The node feature names, in column order.
    #[getter]
    fn node_features(&self) -> Vec<String> {
        self.recipe.features.features.iter().map(|f| f.name.to_string()).collect()
    }

    /// The module map file of the recipe (module-map method), if any.
    #[getter]
    fn map_file(&self) -> Option<String> {
        self.recipe.map_file.clone()
    }

    fn __eq__(&self, other: &PyRecipe) -> bool {
        self.recipe == other.recipe
    }

    fn __repr__(&self) -> String {
        format!("Recipe(method={:?}, node_features={:?})", self.method(), self.node_features())
    }
}

/// One event's graph (`trackgnn.Graph`). Arrays are copies, in the PyTorch Geometric
/// layout: `x` `[N, F]` float32, `edge_index` `[2, E]` int64, `edge_attr` `[E, F_e]` float32.
#[pyclass(name = "Graph", module = "trackgnn", frozen)]
pub struct PyGraph {
    /// The graph.
    pub graph: Graph,
}

/// A `[rows, cols]` numpy array of row-major `v`.
fn matrix<'py, T: Element + Copy>(
    py: Python<'py>,
    v: &[T],
    rows: usize,
    cols: usize,
) -> PyResult<Bound<'py, PyArray2<T>>> {
    PyArray1::from_slice(py, v).reshape([rows, cols])
}

impl PyGraph {
    fn truth(&self) -> PyResult<&trackgnn_graph::GraphTruth> {
        self.graph.truth.as_ref().ok_or_else(|| {
            config_error(format!(
                "the graph of event {} has no truth (built from an event without truth)",
                self.graph.event_id
            ))
        })
    }
}

#[pymethods]
impl PyGraph {
    /// The event the graph was built from.
    #[getter]
    fn event_id(&self) -> u64 {
        self.graph.event_id
    }
    /// N, the number of nodes (hits).
    #[getter]
    fn num_nodes(&self) -> usize {
        self.graph.num_nodes()
    }
    /// E, the number of edges.
    #[getter]
    fn num_edges(&self) -> usize {
        self.graph.num_edges()
    }
    /// The node feature names, in column order.
    #[getter]
    fn node_feature_names(&self) -> Vec<String> {
        self.graph.node_feature_names.clone()
    }
    /// The edge feature names, in column order (empty without edge features).
    #[getter]
    fn edge_feature_names(&self) -> Vec<String> {
        self.graph.edge_feature_names.clone()
    }
    /// Node features `[N, F]` float32, scaled as the recipe says.
    #[getter]
    fn x<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let g = &self.graph;
        matrix(py, &g.node_features, g.num_nodes(), g.num_node_features())
    }
    /// Edge features `[E, F_e]` float32 (`F_e` = 0 without edge features).
    #[getter]
    fn edge_attr<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f32>>> {
        let g = &self.graph;
        matrix(py, &g.edge_features, if g.num_edge_features() == 0 { 0 } else { g.num_edges() }, g.num_edge_features())
    }
    /// Source and destination node of each edge, `[2, E]` int64.
    #[getter]
    fn edge_index<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<i64>>> {
        let g = &self.graph;
        let v: Vec<i64> = g.src.iter().chain(&g.dst).map(|&n| i64::from(n)).collect();
        PyArray1::from_vec(py, v).reshape([2, g.num_edges()])
    }
    /// The TrackML hit_id of each node, `[N]` uint64.
    #[getter]
    fn hit_id<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<u64>> {
        PyArray1::from_slice(py, &self.graph.hit_id)
    }
    /// Unscaled r \[mm\], phi \[rad\], z \[mm\] of each node, three `[N]` float32 arrays.
    #[getter]
    fn positions<'py>(&self, py: Python<'py>) -> [Bound<'py, PyArray1<f32>>; 3] {
        let g = &self.graph;
        [PyArray1::from_slice(py, &g.r), PyArray1::from_slice(py, &g.phi), PyArray1::from_slice(py, &g.z)]
    }
    /// Whether the graph carries truth labels (`y`, `target`, `particle_id`).
    #[getter]
    fn has_truth(&self) -> bool {
        self.graph.truth.is_some()
    }
    /// 1 where an edge joins consecutive hits of one particle, `[E]` uint8.
    #[getter]
    fn y<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        Ok(PyArray1::from_slice(py, &self.truth()?.y))
    }
    /// 1 where an edge is true and its particle a target, `[E]` uint8.
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u8>>> {
        Ok(PyArray1::from_slice(py, &self.truth()?.target))
    }
    /// The particle_id of each node (0 for noise), `[N]` uint64.
    #[getter]
    fn particle_id<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        Ok(PyArray1::from_slice(py, &self.truth()?.particle_id))
    }

    fn __eq__(&self, other: &PyGraph) -> bool {
        self.graph == other.graph
    }

    fn __repr__(&self) -> String {
        let g = &self.graph;
        format!(
            "Graph(event_id={}, nodes={}, edges={}, truth={})",
            g.event_id,
            g.num_nodes(),
            g.num_edges(),
            g.truth.is_some()
        )
    }
}

/// The graph of `event` built with `recipe` (default: the geometric one) on the built-in
/// TrackML detector or `detector` (a `detectors.csv`); the module-map method also needs
/// `module_map` (a file of `trackgnn module-map build`; default the recipe's `map_file`).
/// Returns the graph and its construction figures (the keys of `trackgnn build-graphs
/// --json`'s per-event figures: `nodes`, `edges`, `efficiency`, `purity`, …).
#[pyfunction]
#[pyo3(signature = (event, recipe=None, module_map=None, detector=None))]
pub fn build_graph<'py>(
    py: Python<'py>,
    event: &PyEvent,
    recipe: Option<&PyRecipe>,
    module_map: Option<PathBuf>,
    detector: Option<PathBuf>,
) -> PyResult<(PyGraph, Bound<'py, PyAny>)> {
    let recipe = recipe.map_or_else(|| GraphRecipe::new(GraphMethod::Geometric), |r| r.recipe.clone());
    let det = self::detector(py, detector)?;
    let map_path = module_map.or_else(|| recipe.map_file.as_ref().map(PathBuf::from));
    let (graph, stats) = py
        .detach(|| {
            let map = match (&recipe.method, map_path) {
                (GraphMethod::ModuleMap, Some(p)) => Some(ModuleMap::load(&p)?),
                _ => None,
            };
            build(&event.event, &det, &recipe, map.as_ref())
        })
        .map_err(to_py)?;
    let stats = json_to_py(py, &serde_json::to_string(&stats).expect("stats serialise"))?;
    Ok((PyGraph { graph }, stats))
}

/// A graph file (`eventNNNNNNNNN.graph`, as `trackgnn build-graphs` writes them).
#[pyfunction]
pub fn read_graph(py: Python<'_>, path: PathBuf) -> PyResult<PyGraph> {
    let graph = py.detach(|| read(&path)).map_err(to_py)?;
    Ok(PyGraph { graph })
}

/// Writes `graph` to `path` (whole or not at all); returns the bytes written.
#[pyfunction]
pub fn write_graph(py: Python<'_>, path: PathBuf, graph: &PyGraph) -> PyResult<u64> {
    py.detach(|| write(&path, &graph.graph)).map_err(to_py)
}

/// The Python value of JSON text (`json.loads`): dicts of the libraries' serde structs.
pub fn json_to_py<'py>(py: Python<'py>, json: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.getattr("loads")?.call1((json,))
}

/// A dict of keyword settings as JSON text (`json.dumps`), for the libraries' serde configs.
pub fn py_to_json(d: &Bound<'_, PyDict>) -> PyResult<String> {
    d.py().import("json")?.getattr("dumps")?.call1((d,))?.extract()
}

/// Adds the graph classes and functions to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRecipe>()?;
    m.add_class::<PyGraph>()?;
    m.add_function(wrap_pyfunction!(build_graph, m)?)?;
    m.add_function(wrap_pyfunction!(read_graph, m)?)?;
    m.add_function(wrap_pyfunction!(write_graph, m)?)?;
    Ok(())
}
