//! `stowage scan`'s `risk` fails closed (issue 38, docs/scan-risk.md): every
//! gadget of a corpus taken from the advisories against picklescan,
//! fickling and modelscan is `"code"` and fails `--fail-on code`; model and
//! config classes of many packages are `"import"` and pass it. Every file is
//! generated here: a torch zip whose `data.pkl` calls one global, by each of
//! the opcodes that call (`REDUCE` after `GLOBAL` or `STACK_GLOBAL`, `INST`,
//! `OBJ`, `NEWOBJ`). Also: folder scans list cut pickles, "not a pickle",
//! and `--format sarif`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value as Json;
use stowage_pickle::compat::fix_import;
use stowage_zip::ZipWriter;

/// Standard-library gadgets: command runners, code runners, nested
/// unpicklers, files, the network, the interpreter. Python 2 names too
/// (`commands`, `__builtin__`, `urllib2`), as old pickles write them.
const STDLIB_GADGETS: &[&str] = &[
    "os.system",
    "os.popen",
    "os.execv",
    "os.spawnlp",
    "os.posix_spawn",
    "os.remove",
    "os.fork",
    "posix.system",
    "nt.system",
    "subprocess.Popen",
    "subprocess.run",
    "subprocess.call",
    "subprocess.check_output",
    "subprocess.getoutput",
    "commands.getoutput",
    "_posixsubprocess.fork_exec",
    "pty.spawn",
    "uuid._get_command_stdout",
    "_aix_support._read_cmd_output",
    "_osx_support._read_output",
    "_osx_support._find_build_tool",
    "platform._syscmd_ver",
    "pydoc.pipepager",
    "pydoc.locate",
    "_pyrepl.pager.pipe_pager",
    "webbrowser.open",
    "ctypes.CDLL",
    "ctypes.util.find_library",
    "asyncio.subprocess.create_subprocess_shell",
    "asyncio.unix_events._UnixSubprocessTransport",
    "distutils.spawn.spawn",
    "test.support.script_helper.assert_python_ok",
    "test.support.script_helper.run_python_until_end",
    "doctest.debug_script",
    "doctest.debug_src",
    "timeit.timeit",
    "cProfile.run",
    "profile.run",
    "trace.Trace",
    "pdb.run",
    "bdb.Bdb",
    "code.InteractiveInterpreter",
    "code.interact",
    "codeop.compile_command",
    "runpy.run_path",
    "runpy._run_code",
    "importlib.import_module",
    "imp.load_source",
    "pkgutil.resolve_name",
    "zipimport.zipimporter",
    "builtins.exec",
    "builtins.eval",
    "builtins.compile",
    "builtins.__import__",
    "builtins.getattr",
    "builtins.open",
    "builtins.breakpoint",
    "__builtin__.eval",
    "types.FunctionType",
    "types.CodeType",
    "marshal.loads",
    "pickle.loads",
    "_pickle.loads",
    "cPickle.loads",
    "shelve.open",
    "dbm.open",
    "sqlite3.connect",
    "operator.methodcaller",
    "operator.attrgetter",
    "functools.partial",
    "copyreg._reconstructor",
    "ensurepip._run_pip",
    "venv.create",
    "logging.config.fileConfig",
    "logging.config.listen",
    "socket.create_connection",
    "socket.socket",
    "http.client.HTTPConnection",
    "http.server.HTTPServer",
    "urllib.request.urlopen",
    "urllib.request.urlretrieve",
    "urllib2.urlopen",
    "ftplib.FTP",
    "smtplib.SMTP",
    "poplib.POP3",
    "imaplib.IMAP4",
    "telnetlib.Telnet",
    "nntplib.NNTP",
    "xmlrpc.client.ServerProxy",
    "socketserver.TCPServer",
    "shutil.rmtree",
    "shutil.move",
    "tempfile.mkstemp",
    "io.FileIO",
    "codecs.open",
    "tarfile.open",
    "zipfile.ZipFile",
    "mmap.mmap",
    "threading.Thread",
    "_thread.start_new_thread",
    "multiprocessing.Process",
    "signal.signal",
    "cgitb.enable",
    "antigravity.geohash",
    "tkinter.Tk",
    "atexit.register",
];

/// Third-party gadgets: loaders that unpickle or run code, and what
/// touches files or the network.
const THIRD_PARTY_GADGETS: &[&str] = &[
    "numpy.load",
    "numpy.lib.npyio.load",
    "numpy.fromfile",
    "numpy.memmap",
    "numpy.DataSource",
    "numpy.lib._datasource.DataSource",
    "numpy.ctypeslib.load_library",
    "numpy.f2py.compile",
    "numpy.testing._private.utils.runstring",
    "torch.load",
    "torch.serialization.load",
    "torch.from_file",
    "torch.storage._load_from_bytes",
    "torch.hub.load",
    "torch.jit.load",
    "torch.jit._script.RecursiveScriptModule",
    "torch.fx.graph_module.GraphModule",
    "torch.fx.graph_module.reduce_graph_module",
    "torch.package.PackageImporter",
    "torch.utils.cpp_extension.load_inline",
    "torch._inductor.codecache.compile_file",
    "torch.utils.collect_env.run",
    "torch.multiprocessing.spawn",
    "pandas.read_pickle",
    "pandas.io.pickle.read_pickle",
    "pandas.eval",
    "pandas.HDFStore",
    "yaml.unsafe_load",
    "yaml.UnsafeLoader",
    "yaml.loader.FullLoader",
    "dill.loads",
    "joblib.load",
    "joblib.Parallel",
    "cloudpickle.loads",
    "keras.layers.Lambda",
    "keras.src.layers.core.lambda_layer.Lambda",
    "keras.models.load_model",
    "tensorflow.keras.layers.Lambda",
    "tensorflow.py_function",
    "tensorflow.io.gfile.GFile",
    "tf_keras.layers.Lambda",
    "mlflow.pyfunc.load_model",
    "mlflow.pyfunc.PythonModel",
    "onnx.load",
    "fsspec.open",
    "fsspec.implementations.local.LocalFileSystem",
    "s3fs.S3FileSystem",
    "boto3.session.Session",
    "requests.get",
    "requests.sessions.Session",
    "urllib3.PoolManager",
    "httpx.Client",
    "aiohttp.ClientSession",
    "paramiko.SSHClient",
    "huggingface_hub.hf_hub_download",
    "huggingface_hub.HfApi",
    "sympy.sympify",
    "sympy.parsing.sympy_parser.parse_expr",
    "numexpr.evaluate",
    "pip.main",
    "pip._internal.cli.main.main",
    "h5py.File",
    "jinja2.Template",
    "IPython.core.interactiveshell.InteractiveShell",
    "pexpect.spawn",
    // Dotted names reach an attribute, whatever the package (`module:name`).
    "torch:UntypedStorage.from_file",
    "mymodels.net:Net.forward",
];

/// Model and config classes of many packages, as whole-model and trainer
/// saves name them.
const CLASSES: &[&str] = &[
    "torch.nn.modules.linear.Linear",
    "torch.nn.modules.rnn.LSTM",
    "torch.nn.modules.container.Sequential",
    "torchvision.models.resnet.ResNet",
    "transformers.models.llama.configuration_llama.LlamaConfig",
    "transformers.models.bert.modeling_bert.BertModel",
    "transformers.training_args.TrainingArguments",
    "ultralytics.nn.tasks.DetectionModel",
    "omegaconf.dictconfig.DictConfig",
    "omegaconf.listconfig.ListConfig",
    "sklearn.preprocessing._data.StandardScaler",
    "sklearn.linear_model._logistic.LogisticRegression",
    "timm.models.resnet.ResNet",
    "diffusers.models.unets.unet_2d_condition.UNet2DConditionModel",
    "peft.tuners.lora.config.LoraConfig",
    "pytorch_lightning.callbacks.model_checkpoint.ModelCheckpoint",
    "xgboost.sklearn.XGBClassifier",
    "lightgbm.sklearn.LGBMClassifier",
    "pandas.core.frame.DataFrame",
    "mymodels.net.Net",
    "__main__.MyModel",
];

/// How the pickle calls its global.
#[derive(Clone, Copy, Debug)]
enum Call {
    Global,
    StackGlobal,
    Inst,
    Obj,
    NewObj,
}

const CALLS: [Call; 5] = [
    Call::Global,
    Call::StackGlobal,
    Call::Inst,
    Call::Obj,
    Call::NewObj,
];

/// `module.name`, or `module:name` where the name has dots.
fn split(full: &str) -> (&str, &str) {
    full.split_once(':')
        .unwrap_or_else(|| full.rsplit_once('.').unwrap())
}

/// A pickle that calls `module.name` (`module:name`) with the argument
/// `'id'`.
fn pickle(full: &str, call: Call) -> Vec<u8> {
    let (module, name) = split(full);
    // CPython resolves a dotted name only under protocol 4
    // (`STACK_GLOBAL`); a dotted name is written so.
    let call = if name.contains('.') {
        Call::StackGlobal
    } else {
        call
    };
    let global = format!("c{module}\n{name}\n").into_bytes();
    let arg = b"X\x02\x00\x00\x00id";
    let mut p = Vec::new();
    match call {
        Call::Global => {
            p.extend_from_slice(b"\x80\x02");
            p.extend_from_slice(&global);
            p.extend_from_slice(arg);
            p.extend_from_slice(b"\x85R");
        }
        Call::StackGlobal => {
            p.extend_from_slice(b"\x80\x04");
            for s in [module, name] {
                p.push(0x8c);
                p.push(u8::try_from(s.len()).unwrap());
                p.extend_from_slice(s.as_bytes());
            }
            p.push(0x93);
            p.extend_from_slice(arg);
            p.extend_from_slice(b"\x85R");
        }
        Call::Inst => {
            p.extend_from_slice(b"(S'id'\ni");
            p.extend_from_slice(&global[1..]);
        }
        Call::Obj => {
            p.push(b'(');
            p.extend_from_slice(&global);
            p.extend_from_slice(b"S'id'\no");
        }
        Call::NewObj => {
            p.extend_from_slice(b"\x80\x02");
            p.extend_from_slice(&global);
            p.extend_from_slice(b")\x81");
        }
    }
    p.push(b'.');
    p
}

/// A torch zip whose `data.pkl` is `data_pkl`.
fn torch_zip(data_pkl: &[u8]) -> Vec<u8> {
    let mut zip = ZipWriter::new(Vec::new(), "archive", 64);
    for (name, data) in [
        ("data.pkl", data_pkl),
        (".format_version", b"1".as_slice()),
        ("byteorder", b"little"),
        ("version", b"3\n"),
    ] {
        zip.write_record(name, data).unwrap();
    }
    zip.finish().unwrap()
}

fn stowage(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stowage"))
        .arg("scan")
        .args(args)
        .output()
        .expect("the stowage binary runs");
    (
        out.status.code().expect("an exit code"),
        String::from_utf8(out.stdout).unwrap(),
    )
}

/// Writes each global's file into `dir`, each called by the next opcode in
/// turn: `(global, call, path)`.
fn write_corpus(dir: &Path, globals: &[&str]) -> Vec<(String, Call, PathBuf)> {
    globals
        .iter()
        .enumerate()
        .map(|(i, full)| {
            let call = CALLS[i % CALLS.len()];
            let path = dir.join(format!("{i:03}.pt"));
            std::fs::write(&path, torch_zip(&pickle(full, call))).unwrap();
            ((*full).to_owned(), call, path)
        })
        .collect()
}

/// The risk the scan gives `full` in the file `f` of a scan's output.
fn risk_of(f: &Json, full: &str) -> Json {
    let (module, name) = split(full);
    let full = format!("{module}.{name}");
    let g = f["globals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| {
            format!(
                "{}.{}",
                g["module"].as_str().unwrap(),
                g["name"].as_str().unwrap()
            ) == full
        })
        .unwrap_or_else(|| panic!("{full} is listed: {f}"));
    assert_eq!(g["verdict"], "unsafe", "{full}");
    g["risk"].clone()
}

fn scan_one(path: &Path, fail_on: &str) -> (i32, Json) {
    let (code, stdout) = stowage(&[
        "--json".as_ref(),
        "--fail-on".as_ref(),
        fail_on.as_ref(),
        path.as_os_str(),
    ]);
    (
        code,
        serde_json::from_str(&stdout).expect("one JSON object"),
    )
}

#[test]
fn every_gadget_of_the_corpus_is_code_and_fails() {
    let gadgets: Vec<&str> = STDLIB_GADGETS
        .iter()
        .chain(THIRD_PARTY_GADGETS)
        .copied()
        .collect();
    assert!(gadgets.len() >= 120, "{}", gadgets.len());
    let dir = tempfile::tempdir().unwrap();
    let mut passed = Vec::new();
    for (full, call, path) in write_corpus(dir.path(), &gadgets) {
        let (code, out) = scan_one(&path, "code");
        assert!(out["files"][0]["error"].is_null(), "{full}: {out}");
        // Python 2 names are reported as Python 3 imports them.
        let (module, name) = split(&full);
        let (module, name) = fix_import(module, name);
        let reported = format!("{module}:{name}");
        if risk_of(&out["files"][0], &reported) != "code" || code != 1 {
            passed.push(format!("{full} ({call:?}): exit {code}"));
        }
    }
    assert!(
        passed.is_empty(),
        "gadgets that pass --fail-on code: {passed:#?}"
    );
}

#[test]
fn model_and_config_classes_only_import() {
    let dir = tempfile::tempdir().unwrap();
    let packages: std::collections::BTreeSet<&str> = CLASSES
        .iter()
        .map(|c| c.split('.').next().unwrap())
        .collect();
    assert!(packages.len() >= 15, "{packages:?}");
    for (full, call, path) in write_corpus(dir.path(), CLASSES) {
        let (code, out) = scan_one(&path, "code");
        let f = &out["files"][0];
        assert!(f["error"].is_null(), "{full}: {f}");
        assert_eq!(risk_of(f, &full), "import", "{full} ({call:?})");
        assert_eq!(code, 0, "{full} passes --fail-on code");
        // The default verdict still fails it.
        assert_eq!(scan_one(&path, "unsafe").0, 1, "{full}");
    }
}

/// A folder scan lists a pickle cut short before its call (as picklescan's
/// `broken_model.pkl` is: a string whose length runs past the end), and a
/// file named that is no pickle is "not a pickle", not a global.
#[test]
fn folders_list_cut_pickles_and_refuse_what_is_no_pickle() {
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("broken_model.pkl");
    std::fs::write(&cut, b"cbuiltins\nexec\n(X>\nf = open('x', 'a')tRX.").unwrap();
    let junk = dir.path().join("not_a_pickle.bin");
    std::fs::write(&junk, b"cmod\n\xf8\n").unwrap();
    let (code, stdout) = stowage(&["--json".as_ref(), dir.path().as_os_str()]);
    let out: Json = serde_json::from_str(&stdout).unwrap();
    assert_eq!(code, 2, "{out}");
    let files = out["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "only the pickle is listed: {out}");
    assert!(files[0]["path"]
        .as_str()
        .unwrap()
        .ends_with("broken_model.pkl"));
    assert_eq!(risk_of(&files[0], "builtins.exec"), "code");
    assert!(!files[0]["error"].is_null());

    let (code, stdout) = stowage(&["--json".as_ref(), junk.as_os_str()]);
    let out: Json = serde_json::from_str(&stdout).unwrap();
    assert_eq!(code, 2);
    let f = &out["files"][0];
    assert_eq!(f["globals"].as_array().unwrap().len(), 0, "{f}");
    assert!(f["kind"].is_null());
    assert!(f["error"].as_str().unwrap().contains("not a pickle"), "{f}");
}

/// `--format sarif`: a SARIF 2.1.0 log with one result per unsafe global
/// per pickle, located by file, zip member and byte offset; the exit code
/// as with `--json`.
#[test]
fn sarif_locates_each_unsafe_global() {
    let dir = tempfile::tempdir().unwrap();
    let zip = dir.path().join("evil.pt");
    let data_pkl = pickle("os.system", Call::Global);
    let bytes = torch_zip(&data_pkl);
    std::fs::write(&zip, &bytes).unwrap();
    let bare = dir.path().join("model and class.pkl");
    let mut two = pickle("torch.nn.modules.linear.Linear", Call::NewObj);
    two.extend(pickle("yaml.unsafe_load", Call::StackGlobal));
    std::fs::write(&bare, &two).unwrap();
    let clean =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../stowage/tests/fixtures/simple.pt");

    let (code, stdout) = stowage(&[
        "--format".as_ref(),
        "sarif".as_ref(),
        zip.as_os_str(),
        bare.as_os_str(),
        clean.as_os_str(),
    ]);
    assert_eq!(code, 1);
    let log: Json = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(log["version"], "2.1.0");
    let run = &log["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "stowage");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let results = run["results"].as_array().unwrap();
    let found: Vec<(String, &str, &str)> = results
        .iter()
        .map(|r| {
            let index = r["ruleIndex"].as_u64().unwrap() as usize;
            assert_eq!(rules[index], r["ruleId"].as_str().unwrap());
            let p = &r["properties"];
            (
                format!(
                    "{}.{}",
                    p["module"].as_str().unwrap(),
                    p["name"].as_str().unwrap()
                ),
                r["ruleId"].as_str().unwrap(),
                r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]
                    .as_str()
                    .unwrap(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            (
                "os.system".to_owned(),
                "unsafe-global/code",
                "archive/data.pkl"
            ),
            (
                "torch.nn.modules.linear.Linear".to_owned(),
                "unsafe-global/import",
                "pickle"
            ),
            (
                "yaml.unsafe_load".to_owned(),
                "unsafe-global/code",
                "pickle 2"
            ),
        ]
    );
    // Each byte offset is that of the opcode naming the global, in the
    // file (a torch save's `data.pkl` is stored as it is).
    let files = [&bytes, &two, &two];
    let names: [&[u8]; 3] = [b"cos\nsystem\n", b"ctorch.nn", b"\x8c\x04yaml"];
    for ((r, file), name) in results.iter().zip(files).zip(names) {
        let location = &r["locations"][0]["physicalLocation"];
        assert_eq!(location["region"]["startLine"], 1);
        let at = location["region"]["byteOffset"].as_u64().unwrap() as usize;
        let opcode = &file[at..];
        assert!(
            opcode.starts_with(name) || (opcode[0] == 0x93 && name[0] == 0x8c),
            "{r}"
        );
        let uri = location["artifactLocation"]["uri"].as_str().unwrap();
        assert!(uri.starts_with("file:///") && !uri.contains(' '), "{uri}");
    }
    // STACK_GLOBAL names the global where it pops its strings.
    let yaml_at = results[2]["properties"]["offset"].as_u64().unwrap() as usize;
    assert_eq!(two[yaml_at], 0x93);

    // Nothing unsafe: no results, exit 0.
    let (code, stdout) = stowage(&["--format".as_ref(), "sarif".as_ref(), clean.as_os_str()]);
    assert_eq!(code, 0);
    let log: Json = serde_json::from_str(&stdout).unwrap();
    assert_eq!(log["runs"][0]["results"].as_array().unwrap().len(), 0);
}
