use super::*;
use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::unpickle;
use crate::checkpoint::value::graph::{ByteOrder, Checkpoint};
use crate::error::{CheckpointError, FormatError};
use crate::Device;
use crate::Scalar;
use crate::{Tensor, UntypedStorage};

/// Pickles made by CPython with numpy (protocol 2, as `torch.save` writes).
const SHARED_ARRAY: &str = concat!(
    "80027d7100285801000000787101636e756d70792e5f636f72652e6d756c746961727261790a5f72",
    "65636f6e7374727563740a7102636e756d70790a6e6461727261790a71034b00857104635f636f64",
    "6563730a656e636f64650a7105580100000062710658060000006c6174696e317107867108527109",
    "87710a52710b284b014b0385710c636e756d70790a64747970650a710d58020000006634710e8988",
    "87710f527110284b0358010000003c71114e4e4e4affffffff4affffffff4b007471126289680558",
    "0d000000000000000000c2803f000000407113680786711452711574711662580100000079711768",
    "0b752e",
);
const SCALARS_SHARED_DTYPE: &str = concat!(
    "80025d710028636e756d70792e5f636f72652e6d756c746961727261790a7363616c61720a710163",
    "6e756d70790a64747970650a71025802000000663471038988877104527105284b0358010000003c",
    "71064e4e4e4affffffff4affffffff4b0074710762635f636f646563730a656e636f64650a710858",
    "050000000000c3803f710958060000006c6174696e31710a86710b52710c86710d52710e68016805",
    "6808580400000000002040710f680a867110527111867112527113652e",
);
const BIG_ENDIAN: &str = concat!(
    "8002636e756d70792e5f636f72652e6d756c746961727261790a5f7265636f6e7374727563740a71",
    "00636e756d70790a6e6461727261790a71014b00857102635f636f646563730a656e636f64650a71",
    "03580100000062710458060000006c6174696e317105867106527107877108527109284b014b0285",
    "710a636e756d70790a64747970650a710b58020000007532710c898887710d52710e284b03580100",
    "00003e710f4e4e4e4affffffff4affffffff4b007471106289680358040000000001000271116805",
    "867112527113747114622e",
);
const OBJECTS: &str = concat!(
    "80027d71002858030000006261677101635f5f6d61696e5f5f0a4261670a710229817103284b014b",
    "02657d710458030000007461677105580100000074710673625803000000626f787107635f5f6d61",
    "696e5f5f0a426f780a71082981710958010000006b710a4b03735807000000736c6f74746564710b",
    "635f5f6d61696e5f5f0a536c6f747465640a710c2981710d4e7d710e28580100000061710f4b0158",
    "010000006271105d71114b026175867112625805000000706c61696e7113635f5f6d61696e5f5f0a",
    "506c61696e0a7114298171157d711658010000007871174b017362752e",
);
const OBJECT_ARRAY: &str = concat!(
    "8002636e756d70792e5f636f72652e6d756c746961727261790a5f7265636f6e7374727563740a71",
    "00636e756d70790a6e6461727261790a71014b00857102635f636f646563730a656e636f64650a71",
    "03580100000062710458060000006c6174696e317105867106527107877108527109284b014b0285",
    "710a636e756d70790a64747970650a710b58020000004f38710c898887710d52710e284b03580100",
    "00007c710f4e4e4e4affffffff4affffffff4b3f74711062895d7111284b01580100000061711265",
    "747113622e",
);

/// `l = [np.dtype('f4'), np.dtype('i8')]; (l, {l[0]: 'a', l[1]: 'b'},
/// {(l[0], 1): 'c', (l[1], 1): 'd'})`: the dtypes are stand-ins (empty
/// tuples) while the pickle runs.
const DTYPE_KEYS: &str = concat!(
    "80025d710028636e756d70790a64747970650a71015802000000663471028988877103527104284b",
    "0358010000003c71054e4e4e4affffffff4affffffff4b0074710662680158020000006938710789",
    "88877108527109284b0368054e4e4e4affffffff4affffffff4b0074710a62657d710b2868045801",
    "00000061710c6809580100000062710d757d710e2868044b0186710f580100000063711068094b01",
    "8671115801000000647112758771132e",
);

struct NoStorage;

impl StorageSource for NoStorage {
    fn load(&mut self, key: &str, _: Option<usize>, _: usize, _: Device) -> Result<UntypedStorage> {
        Err(Error::Format(FormatError::MissingRecord {
            name: key.into(),
        }))
    }
}

fn unhex(h: &str) -> Vec<u8> {
    hex::decode(h).expect("hex")
}

fn read(hex: &str, options: &LoadOptions) -> Result<Checkpoint> {
    let mut src = NoStorage;
    let mut hooks = TorchHooks::new(&mut src, options, ByteOrder::Little, false);
    let mut p = unpickle(&unhex(hex), &mut hooks, &options.pickle_limits)?;
    let objects = hooks.finish(&mut p)?;
    let mut c = Checkpoint::new();
    c.graph = p.graph;
    c.root = p.root;
    c.objects = objects;
    c.compact();
    Ok(c)
}

fn inert() -> LoadOptions {
    LoadOptions::default().with_inert(true)
}

fn f32s(t: &Tensor) -> Vec<f32> {
    t.contiguous().unwrap().to_vec::<f32>().unwrap()
}

#[test]
fn an_array_the_memo_shares_is_the_array_at_both_paths() {
    let c = read(SHARED_ARRAY, &inert()).unwrap();
    for key in ["x", "y"] {
        let a = c.get(key).unwrap().as_ndarray().unwrap();
        assert_eq!(a.dtype.name(), "float32");
        assert_eq!(f32s(&a.tensor), [0.0, 1.0, 2.0]);
    }
}

#[test]
fn a_dtype_the_memo_copies_before_its_build_is_resolved() {
    let c = read(SCALARS_SHARED_DTYPE, &inert()).unwrap();
    let values: Vec<_> = c
        .root_value()
        .as_list()
        .unwrap()
        .map(|v| match v.raw() {
            Value::Ext(Object::NumpyScalar(s)) => (s.dtype.name(), s.value),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        values,
        [
            ("float32".to_owned(), Scalar::Float(1.5)),
            ("float32".to_owned(), Scalar::Float(2.5))
        ]
    );
}

#[test]
fn big_endian_arrays_are_swapped_to_native() {
    let options = LoadOptions::default().with_allow_globals([
        "numpy.core.multiarray._reconstruct",
        "numpy._core.multiarray._reconstruct",
        "numpy.ndarray",
        "numpy.dtype",
    ]);
    let c = read(BIG_ENDIAN, &options).unwrap();
    let a = c.root_value().as_ndarray().unwrap();
    assert!(a.dtype.big_endian());
    assert_eq!(
        a.tensor.contiguous().unwrap().to_vec::<u16>().unwrap(),
        [1, 2]
    );
    // Without the names allowed (or --inert), refused as PyTorch refuses them.
    assert!(matches!(
        read(BIG_ENDIAN, &LoadOptions::default()),
        Err(Error::Checkpoint(CheckpointError::GlobalNotAllowed { .. }))
    ));
}

#[test]
fn inert_objects_record_state_items_and_slots() {
    let c = read(OBJECTS, &inert()).unwrap();
    // A list subclass: appended items by index, then its `__dict__`.
    assert_eq!(c.get("bag.0").unwrap().as_i64().unwrap(), 1);
    assert_eq!(c.get("bag.1").unwrap().as_i64().unwrap(), 2);
    assert_eq!(c.get("bag.tag").unwrap().as_str().unwrap(), "t");
    // A dict subclass: its items by key.
    assert_eq!(c.get("box.k").unwrap().as_i64().unwrap(), 3);
    // `(None, slots)` state: the slots by name.
    assert_eq!(c.get("slotted.a").unwrap().as_i64().unwrap(), 1);
    assert_eq!(c.get("slotted.b.0").unwrap().as_i64().unwrap(), 2);
    assert_eq!(c.get("plain.x").unwrap().as_i64().unwrap(), 1);
    let objects: Vec<_> = c
        .root_value()
        .objects()
        .unwrap()
        .iter()
        .map(|o| {
            let r = o.as_object().unwrap();
            (
                o.path().to_vec(),
                format!("{}.{}", r.module, r.name),
                r.construct,
            )
        })
        .collect();
    assert_eq!(objects.len(), 4);
    assert_eq!(objects[0].1, "__main__.Bag");
    assert_eq!(objects[0].2, Construct::New);
    assert_eq!(c.unsaveable().unwrap().len(), 4);
}

#[test]
fn object_arrays_are_refused_or_inert() {
    let options = LoadOptions::default().with_allow_globals([
        "numpy._core.multiarray._reconstruct",
        "numpy.ndarray",
        "numpy.dtype",
    ]);
    assert!(matches!(
        read(OBJECT_ARRAY, &options),
        Err(Error::Checkpoint(CheckpointError::Unsupported { .. }))
    ));
    let c = read(OBJECT_ARRAY, &inert()).unwrap();
    let o = c.root_value();
    assert_eq!(o.class(), Some(("numpy._core.multiarray", "_reconstruct")));
    assert_eq!(c.get("state.4.1").unwrap().as_str().unwrap(), "a");
}

#[test]
fn packed_dates_and_times_decode_as_cpython_packs_them() {
    let t = time_of_day(&[0x83, 4, 5, 0, 1, 2], None);
    assert_eq!((t.hour, t.fold, t.microsecond), (3, true, 258));
    assert_eq!(t.to_string(), "03:04:05.000258");
    assert_eq!(join_path("PurePosixPath", &["/", "a", "b"]), "/a/b");
    assert_eq!(join_path("PureWindowsPath", &["C:\\", "a"]), "C:\\a");
    assert_eq!(join_path("Path", &[]), ".");
}

/// Keys that are numpy dtypes, alone or in tuples, stay as many keys as
/// Python holds: a dtype is an empty tuple standing in for it while the
/// pickle runs, which must not compare as `()` (tuples the pickle built
/// compare by their items; a stand-in by identity).
#[test]
fn dtype_keys_stay_apart() {
    let c = read(DTYPE_KEYS, &inert()).unwrap();
    let root = c.root_value();
    for i in ["1", "2"] {
        assert_eq!(root.get(i).unwrap().len().unwrap(), 2, "dict {i}");
    }
}
