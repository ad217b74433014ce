//! What an unsafe global would do: run code, or only import a class.
//!
//! The rule fails closed (docs/scan-risk.md): an unsafe global is
//! [`Risk::Import`] only when it is a class (by Python's naming convention,
//! CapWords) of a third-party package or of `__main__`, and not a known
//! gadget. Everything else is [`Risk::Code`]:
//! - every module of the standard library of any Python from 2.6 to 3.14
//!   ([`STDLIB_MODULES`], generated, never typed in), so a new gadget there
//!   needs no change to any table;
//! - any function (a name that is not CapWords), and any dotted name
//!   (`Outer.method` reaches an attribute);
//! - names that are not Python names, and `<dynamic>`, `<extension>` and
//!   `<malformed>`, which only running the pickle would name;
//! - the third-party gadgets of [`GADGETS`].
//!
//! Telling a class from a function by its name is a heuristic: a package
//! may give a function a CapWords name. [`GADGETS`] lists those known to
//! run code; the default verdict (`unsafe`, exit 1) stays the safe one.

use super::stdlib_modules::STDLIB_MODULES;
use super::stream::python_name;

/// How dangerous an unsafe global is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Risk {
    /// A class of a third-party package or of `__main__`, on no gadget
    /// list: `torch.load(weights_only=False)` imports it and builds an
    /// instance, which runs that package's code, which the user may trust
    /// (`torch.nn.modules.linear.Linear`, `__main__.MyModel`).
    Import,
    /// Anything else: it may run commands or code, or touch files, the
    /// network or the interpreter (`os.system`, `builtins.exec`,
    /// `subprocess.Popen`, `yaml.unsafe_load`), or what it names is not
    /// known without running the pickle.
    Code,
}

impl Risk {
    /// `"import"` or `"code"`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Risk::Import => "import",
            Risk::Code => "code",
        }
    }
}

impl std::fmt::Display for Risk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// A third-party global known to run code, touch files or the network.
#[derive(Debug)]
pub(super) struct Gadget {
    /// The module; it stands for its submodules too (`yaml` for
    /// `yaml.loader`).
    pub module: &'static str,
    /// The name within it (or any of its submodules), or `*` for every name.
    pub name: &'static str,
    /// Why it is listed: the advisory or the write-up.
    pub why: &'static str,
}

const fn g(module: &'static str, name: &'static str, why: &'static str) -> Gadget {
    Gadget { module, name, why }
}

/// The third-party gadgets: what the class-of-a-package rule would
/// otherwise let through, and the functions the peers' advisories name (a
/// function is code by the rule already; listing it says why). Its copy in
/// docs/scan-risk.md is held to it by a test.
pub(super) const GADGETS: &[Gadget] = &[
    g("numpy", "load", "unpickles with `allow_pickle` (CVE-2019-6446)"),
    g("numpy", "fromfile", "reads any file"),
    g("numpy", "memmap", "maps any file, and creates it"),
    g("numpy", "DataSource", "opens files and URLs"),
    g("numpy.ctypeslib", "*", "loads a shared library"),
    g("numpy.f2py", "*", "compiles and imports Fortran and C"),
    g("numpy.distutils", "*", "runs compilers"),
    g("numpy.testing", "*", "`runstring` runs code (picklescan, fickling, modelscan)"),
    g("numpy.lib.npyio", "*", "file loaders; `load` unpickles"),
    g("numpy.lib.format", "*", "`read_array` unpickles"),
    g("torch", "load", "a nested unpickler, with `weights_only=False` before PyTorch 2.6"),
    g("torch", "from_file", "maps any file"),
    g("torch.storage", "_load_from_bytes", "unpickles nested bytes with `torch.load`, no allowlist"),
    g("torch.serialization", "*", "`load` and its helpers unpickle"),
    g("torch.hub", "*", "downloads and runs a repository's `hubconf.py`"),
    g("torch.jit", "*", "loads and compiles TorchScript"),
    g("torch.fx", "*", "`GraphModule` runs `exec` on its code when unpickled"),
    g("torch.package", "*", "imports code from a package archive"),
    g("torch.utils.cpp_extension", "*", "compiles and loads C++"),
    g("torch._inductor", "*", "compiles and loads code (`codecache`)"),
    g("torch._dynamo", "*", "compiles and runs bytecode"),
    g("torch.utils.collect_env", "*", "`run` runs shell commands"),
    g("torch.multiprocessing", "*", "starts processes, as `multiprocessing`"),
    g("torch.distributed.rpc", "*", "runs functions on other processes"),
    g("pandas", "read_pickle", "unpickles any file, no allowlist"),
    g("pandas.io.pickle", "*", "unpickles any file, no allowlist"),
    g("pandas", "eval", "evaluates expressions (`python` engine: `eval`)"),
    g("pandas.core.computation", "*", "evaluates expressions"),
    g("pandas", "HDFStore", "opens and creates files"),
    g("yaml", "*", "`load`, `unsafe_load` and the unsafe loaders build any object (CVE-2017-18342, CVE-2020-14343)"),
    g("ruamel", "*", "YAML loaders that build any object"),
    g("dill", "*", "a pickle loader with no allowlist"),
    g("joblib", "*", "`load` unpickles; `Parallel` evaluates `pre_dispatch` (CVE-2022-21797)"),
    g("cloudpickle", "*", "a pickle loader with no allowlist"),
    g("keras", "Lambda", "runs the Python function it holds (CVE-2024-3660)"),
    g("keras", "load_model", "loads a model, `Lambda` layers included (CVE-2025-1550)"),
    g("keras", "py_function", "runs a Python function"),
    g("tf_keras", "Lambda", "runs the Python function it holds (CVE-2024-3660)"),
    g("tf_keras", "load_model", "loads a model, `Lambda` layers included"),
    g("tensorflow", "Lambda", "runs the Python function it holds (CVE-2024-3660)"),
    g("tensorflow", "load_model", "loads a model, `Lambda` layers included"),
    g("tensorflow", "py_function", "runs a Python function (modelscan's unsafe operators)"),
    g("tensorflow", "py_func", "runs a Python function (modelscan's unsafe operators)"),
    g("tensorflow", "numpy_function", "runs a Python function"),
    g("tensorflow.io", "*", "reads and writes files (`read_file`, `write_file`)"),
    g("mlflow", "*", "model loaders unpickle (CVE-2024-37052 to CVE-2024-37060)"),
    g("onnx", "load", "reads external data from any path (CVE-2024-27318)"),
    g("onnx", "load_model", "reads external data from any path (CVE-2024-27318)"),
    g("fsspec", "*", "opens local and remote files"),
    g("s3fs", "*", "opens remote files"),
    g("gcsfs", "*", "opens remote files"),
    g("boto3", "*", "the network, with the user's credentials"),
    g("botocore", "*", "the network, with the user's credentials"),
    g("requests", "*", "the network"),
    g("urllib3", "*", "the network"),
    g("httpx", "*", "the network"),
    g("aiohttp", "*", "the network"),
    g("paramiko", "*", "SSH connections and remote commands"),
    g("fabric", "*", "remote commands over SSH"),
    g("pexpect", "*", "runs commands"),
    g("sh", "*", "runs commands"),
    g("pip", "*", "installs packages, running their code (CVE-2025-1716)"),
    g("setuptools", "*", "builds and installs packages, running their code"),
    g("huggingface_hub", "*", "downloads files and repositories"),
    g("h5py", "File", "opens and creates files"),
    g("sympy", "sympify", "evaluates strings with `eval`"),
    g("sympy", "parse_expr", "evaluates strings with `eval`"),
    g("sympy.parsing", "*", "evaluates strings with `eval`"),
    g("numexpr", "*", "`evaluate` evaluates strings (CVE-2023-39631)"),
    g("IPython", "*", "runs code and shell commands"),
    g("jinja2", "*", "templates run code when rendered"),
];

/// The risk of the unsafe global `module.name` (named as Python 3 imports
/// it).
pub fn risk(module: &str, name: &str) -> Risk {
    match reason(module, name) {
        Some(_) => Risk::Code,
        None => Risk::Import,
    }
}

/// Why the unsafe global `module.name` is [`Risk::Code`], in a few words;
/// `None` when it is [`Risk::Import`].
pub(super) fn reason(module: &str, name: &str) -> Option<&'static str> {
    if module.starts_with('<') {
        Some("named only when the pickle runs")
    } else if !python_name(module) || !python_name(name) {
        Some("not a Python name")
    } else if is_stdlib(module) {
        Some("a module of the standard library")
    } else if let Some(g) = GADGETS.iter().find(|g| g.matches(module, name)) {
        Some(g.why)
    } else if name.contains('.') {
        Some("reaches an attribute")
    } else if !is_class_name(name) {
        Some("a function, not a class")
    } else {
        None
    }
}

impl Gadget {
    fn matches(&self, module: &str, name: &str) -> bool {
        within(module, self.module) && (self.name == "*" || self.name == name)
    }
}

/// Whether `module` is `parent` or one of its submodules.
fn within(module: &str, parent: &str) -> bool {
    module
        .strip_prefix(parent)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'))
}

/// Whether `module` is of the standard library of some Python.
fn is_stdlib(module: &str) -> bool {
    let top = module.split('.').next().unwrap_or(module);
    STDLIB_MODULES.binary_search(&top).is_ok()
}

/// A class by Python's convention: one identifier (no attribute reached
/// through a dot) that starts with a capital letter (`Linear`, `LSTM`,
/// `LlamaConfig`). Only ASCII names pass ([`python_name`]): no package
/// names its classes otherwise, and a look-alike letter must not pass.
fn is_class_name(name: &str) -> bool {
    python_name(name) && !name.contains('.') && name.starts_with(|c: char| c.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stdlib_table_is_sorted_and_whole() {
        assert!(STDLIB_MODULES.windows(2).all(|w| w[0] < w[1]));
        assert!(STDLIB_MODULES.len() > 450, "{}", STDLIB_MODULES.len());
        // Python 2 and 3, public and private.
        for m in [
            "os",
            "cPickle",
            "commands",
            "_aix_support",
            "_pyrepl",
            "test",
            "nntplib",
        ] {
            assert!(is_stdlib(m), "{m}");
        }
        assert!(!is_stdlib("__main__"));
        assert!(!is_stdlib("torch"));
    }

    #[test]
    fn code_and_imports() {
        for (m, n) in [
            ("os", "system"),
            ("posix", "system"),
            ("os.path", "join"),
            ("builtins", "exec"),
            ("subprocess", "Popen"),
            ("nntplib", "NNTP"),
            ("operator", "add"),
            ("collections", "Counter"),
            ("torch.nn.modules.linear", "linear"),
            ("torch.nn.modules.linear", "Linear.forward"),
            ("torch.fx.graph_module", "GraphModule"),
            ("keras.src.layers.core.lambda_layer", "Lambda"),
            ("numpy", "DataSource"),
            ("yaml.loader", "UnsafeLoader"),
            ("__main__", "helper"),
            ("__main__", "_Private"),
            ("mod", "\u{fffd}"),
            ("<dynamic>", "STACK_GLOBAL"),
            ("<extension>", "5"),
            ("<malformed>", "FRAME"),
            ("", "X"),
            ("a..b", "X"),
        ] {
            assert_eq!(risk(m, n), Risk::Code, "{m}.{n}");
        }
        for (m, n) in [
            ("torch.nn.modules.linear", "Linear"),
            ("torch.nn.modules.rnn", "LSTM"),
            ("__main__", "MyModel"),
            ("ossify", "X"),
            ("transformers.training_args", "TrainingArguments"),
            ("numpyro", "Sample"),
        ] {
            assert_eq!(risk(m, n), Risk::Import, "{m}.{n}");
        }
    }

    /// docs/scan-risk.md lists every gadget with its reason, row by row.
    #[test]
    fn the_docs_list_every_gadget() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/scan-risk.md");
        let doc = std::fs::read_to_string(path).expect("docs/scan-risk.md");
        let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `")).collect();
        let expected: Vec<String> = GADGETS
            .iter()
            .map(|g| format!("| `{}` | `{}` | {} |", g.module, g.name, g.why))
            .collect();
        assert_eq!(rows, expected, "docs/scan-risk.md's table");
    }
}
