//! What an unsafe global would do: run code, or only import a class.
//!
//! One table: the modules and names that run commands or code, touch files,
//! the network or the interpreter. It covers every name the peers' denylists
//! list (picklescan's `_unsafe_globals`, modelscan's `unsafe_globals` at
//! every severity, fickling's `UNSAFE_IMPORTS`), and more. Every other
//! unsafe global is a class or function of some package that
//! `torch.load(weights_only=False)` would import and call: a model's class,
//! a training library's config. Those are [`Risk::Import`].

/// How dangerous an unsafe global is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Risk {
    /// A class or function of a package, imported and called: it runs that
    /// package's code, which the user may trust (`torch.nn.Linear`,
    /// `__main__.MyModel`).
    Import,
    /// It runs commands or code, or touches files, the network or the
    /// interpreter (`os.system`, `builtins.exec`, `subprocess.Popen`), or
    /// what it names is not known without running the pickle.
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

/// `(module, name)`: `"*"` for every name of the module. A module stands for
/// its submodules too (`os` for `os.path`).
const CODE: &[(&str, &str)] = &[
    // The interpreter itself: every builtin not allowed (eval, exec,
    // compile, open, getattr, __import__, breakpoint, input, …).
    ("builtins", "*"),
    ("__builtin__", "*"),
    ("__builtins__", "*"),
    ("sys", "*"),
    ("types", "*"),
    ("gc", "*"),
    ("inspect", "*"),
    ("importlib", "*"),
    ("imp", "*"),
    ("pkgutil", "*"),
    ("runpy", "*"),
    ("code", "*"),
    ("codeop", "*"),
    ("ctypes", "*"),
    ("_ctypes", "*"),
    ("cffi", "*"),
    ("marshal", "*"),
    ("pickle", "*"),
    ("_pickle", "*"),
    ("cPickle", "*"),
    ("dill", "*"),
    ("cloudpickle", "*"),
    ("joblib", "*"),
    ("shelve", "*"),
    ("bdb", "*"),
    ("pdb", "*"),
    ("trace", "*"),
    ("timeit", "*"),
    ("profile", "*"),
    ("cProfile", "*"),
    ("operator", "attrgetter"),
    ("operator", "itemgetter"),
    ("operator", "methodcaller"),
    ("functools", "partial"),
    ("functools", "reduce"),
    ("copyreg", "*"),
    ("copy_reg", "*"),
    ("_operator", "*"),
    ("_functools", "*"),
    ("numpy.testing._private.utils", "runstring"),
    ("numpy.f2py", "*"),
    ("numpy.distutils", "*"),
    ("torch.serialization", "load"),
    ("torch.hub", "*"),
    ("torch._inductor.codecache", "*"),
    ("torch.utils.cpp_extension", "*"),
    ("torch.jit", "*"),
    ("torch._dynamo", "*"),
    ("torch.fx", "*"),
    ("torch.package", "*"),
    // Processes and the system.
    ("os", "*"),
    ("posix", "*"),
    ("nt", "*"),
    ("subprocess", "*"),
    ("_posixsubprocess", "*"),
    ("commands", "*"),
    ("popen2", "*"),
    ("pty", "*"),
    ("signal", "*"),
    ("multiprocessing", "*"),
    ("concurrent", "*"),
    ("threading", "*"),
    ("_thread", "*"),
    ("asyncio", "*"),
    ("platform", "*"),
    ("pydoc", "*"),
    ("venv", "*"),
    ("ensurepip", "*"),
    ("pip", "*"),
    ("setuptools", "*"),
    ("distutils", "*"),
    ("site", "*"),
    ("sysconfig", "*"),
    ("resource", "*"),
    ("fcntl", "*"),
    // Files.
    ("io", "*"),
    ("_io", "*"),
    ("shutil", "*"),
    ("tempfile", "*"),
    ("glob", "*"),
    ("fileinput", "*"),
    ("pathlib", "*"),
    ("zipfile", "*"),
    ("tarfile", "*"),
    ("linecache", "*"),
    ("mmap", "*"),
    ("logging", "*"),
    // The network.
    ("socket", "*"),
    ("_socket", "*"),
    ("ssl", "*"),
    ("select", "*"),
    ("selectors", "*"),
    ("socketserver", "*"),
    ("http", "*"),
    ("httplib", "*"),
    ("urllib", "*"),
    ("urllib2", "*"),
    ("urllib3", "*"),
    ("requests", "*"),
    ("aiohttp", "*"),
    ("httpx", "*"),
    ("ftplib", "*"),
    ("smtplib", "*"),
    ("poplib", "*"),
    ("imaplib", "*"),
    ("telnetlib", "*"),
    ("xmlrpc", "*"),
    ("webbrowser", "*"),
    ("paramiko", "*"),
];

/// The risk of the unsafe global `module.name` (named as Python 3 imports
/// it). Globals named only when the pickle runs (`<dynamic>`, `<extension>`,
/// `<malformed>`) are [`Risk::Code`].
pub fn risk(module: &str, name: &str) -> Risk {
    if module.starts_with('<') {
        return Risk::Code;
    }
    let within = |m: &str| {
        module == m
            || module
                .strip_prefix(m)
                .is_some_and(|rest| rest.starts_with('.'))
    };
    let code = CODE
        .iter()
        .any(|&(m, n)| within(m) && (n == "*" || n == name));
    if code {
        Risk::Code
    } else {
        Risk::Import
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_and_imports() {
        for (m, n) in [
            ("os", "system"),
            ("posix", "system"),
            ("os.path", "join"),
            ("builtins", "exec"),
            ("builtins", "getattr"),
            ("subprocess", "Popen"),
            ("runpy", "run_path"),
            ("socket", "create_connection"),
            ("requests.api", "get"),
            ("aiohttp.client", "ClientSession"),
            ("webbrowser", "open"),
            ("operator", "attrgetter"),
            ("functools", "partial"),
            ("torch.serialization", "load"),
            ("torch._inductor.codecache", "compile_file"),
            ("pydoc", "pipepager"),
            ("<dynamic>", "STACK_GLOBAL"),
            ("<extension>", "5"),
            ("<malformed>", "FRAME"),
        ] {
            assert_eq!(risk(m, n), Risk::Code, "{m}.{n}");
        }
        for (m, n) in [
            ("torch.nn.modules.linear", "Linear"),
            ("__main__", "MyModel"),
            ("operator", "add"),
            ("functools", "wraps"),
            ("torch.serialization", "StorageType"),
            ("ossify", "x"),
            ("transformers.training_args", "TrainingArguments"),
        ] {
            assert_eq!(risk(m, n), Risk::Import, "{m}.{n}");
        }
    }
}
