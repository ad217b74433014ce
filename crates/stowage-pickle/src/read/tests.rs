//! Tests of the unpickler.

use super::super::testkit::{
    load, load_windowed, render, unhex, Tag, TestError, TestHooks, FIXTURES,
};
use super::text::MAX_INT_DIGITS;
use super::*;
use crate::NODES_PER_BYTE;
use proptest::prelude::*;

fn err(data: &[u8]) -> PickleError {
    err_with(data, &Limits::default())
}

fn err_with(data: &[u8], limits: &Limits) -> PickleError {
    match unpickle(data, &mut TestHooks, limits) {
        Err(TestError::Pickle(e)) => e,
        other => panic!("expected a pickle error, got {other:?}"),
    }
}

fn rendered(data: &[u8]) -> String {
    let p = load(data).unwrap_or_else(|e| panic!("{e:?}"));
    render(&p.graph, &p.root)
}

/// Hand-made pickles for opcodes CPython 3 does not write; each was
/// checked with `pickle.loads(data, encoding="utf-8")` (with a class
/// `__main__.C` taking `*args`), whose result is noted.
#[test]
fn hand_made_pickles() {
    let cases: &[(&[u8], &str)] = &[
        // C(1, 2) via INST
        (b"(I1\nI2\ni__main__\nC\n.", "obj[g:__main__.C, (1, 2), None]"),
        // C(1) via OBJ
        (b"(c__main__\nC\nI1\no.", "obj[g:__main__.C, (1), None]"),
        // ("a'bA\nA\\q", 'q')
        (b"(S'a\\'b\\x41\\n\\101\\q'\nS\"q\"\nt.", "('a\\u{27}bA\\u{a}A\\u{5c}q', 'q')"),
        // ('abc', 'é')
        (b"(T\x03\x00\x00\x00abcU\x02\xc3\xa9t.", "('abc', '\\u{e9}')"),
        // l = []; l.append(l)
        (b"]2a.", "#0=[@0]"),
        // ('hi', b'\xff')
        (b"\x80\x04(\x8d\x02\x00\x00\x00\x00\x00\x00\x00hi\x8e\x01\x00\x00\x00\x00\x00\x00\x00\xfft.", "('hi', b:ff)"),
        // C() via NEWOBJ_EX with empty kwargs
        (b"\x80\x04c__main__\nC\n)}\x92.", "obj[g:__main__.C, (), None]"),
        // {1: 3}: equal keys (1 == True) replace the value, keep the key
        (b"(K\x01K\x02\x88K\x03d.", "{1: 3}"),
        (b"}(K\x01K\x02K\x01K\x03u.", "{1: 3}"),
        (b"}(G\x3f\xf0\x00\x00\x00\x00\x00\x00K\x02K\x01K\x03u.", "{f:3ff0000000000000: 3}"),
        // {1, 2}
        (b"\x80\x04\x8f(K\x01K\x02\x88\x90.", "set{1, 2}"),
        (b"\x80\x04(K\x01K\x01\x91.", "frozenset{1}"),
        // Equal strings and bytes that are two objects (no memo) are one key or item:
        // {'a': 2}, {'a': 2} by DICT, {b'a': 2}, {'a'}, frozenset({'a'})
        (b"}(X\x01\x00\x00\x00aK\x01X\x01\x00\x00\x00aK\x02u.", "{'a': 2}"),
        (b"(X\x01\x00\x00\x00aK\x01X\x01\x00\x00\x00aK\x02d.", "{'a': 2}"),
        (b"\x80\x03}(C\x01aK\x01C\x01aK\x02u.", "{b:61: 2}"),
        (b"\x80\x04\x8f(X\x01\x00\x00\x00aX\x01\x00\x00\x00a\x90.", "set{'a'}"),
        (b"\x80\x04(X\x01\x00\x00\x00aX\x01\x00\x00\x00a\x91.", "frozenset{'a'}"),
        // ('é\\\\u0041\\\\B😀', 'plainé')
        (b"(V\\u00e9\\\\u0041\\\\\\u0042\\U0001F600\nVplain\xe9\nt.", "('\\u{e9}\\u{5c}\\u{5c}u0041\\u{5c}\\u{5c}B\\u{1f600}', 'plain\\u{e9}')"),
        // (12345678901234567890123, -5, -7, 8)
        (b"(L12345678901234567890123L\nL-5\nI-7\nI+8\nt.", "(12345678901234567890123, -5, -7, 8)"),
        // [1]
        (b"(I1\nl.", "[1]"),
        // l = []; (l, l) with 4-byte memo indexes
        (b"]r\x00\x01\x00\x00j\x00\x01\x00\x00\x86.", "(#0=[], @0)"),
        // POP discards a bare mark; POP_MARK discards items and mark
        (b"K\x01(0.", "1"),
        (b"K\x01(K\x02K\x031.", "1"),
    ];
    for (data, want) in cases {
        assert_eq!(rendered(data), *want, "{:?}", String::from_utf8_lossy(data));
    }
}

/// Tuples used as keys or items compare by content, as Python's do (a
/// tuple is equal to another of equal items, `True == 1 == 1.0` within, at
/// any depth below 16), one tuple used twice included; a tuple holding a `NaN`
/// equals no other. Each result as `pickle.loads` gives it.
#[test]
fn equal_tuples_are_one_key() {
    let cases: &[(&[u8], &str)] = &[
        // {(1, 'a'): 3}
        (
            b"}(K\x01X\x01\x00\x00\x00a\x86K\x02K\x01X\x01\x00\x00\x00a\x86K\x03u.",
            "{(1, 'a'): 3}",
        ),
        // {((True,), 2.0): 5}, the second key ((1,), 2)
        (
            b"}(\x88\x85G@\x00\x00\x00\x00\x00\x00\x00\x86K\x01K\x01\x85K\x02\x86K\x05u.",
            "{((True), f:4000000000000000): 5}",
        ),
        // {(nan,): 1, (nan,): 2}
        (
            b"}(G\x7f\xf8\x00\x00\x00\x00\x00\x00\x85K\x01G\x7f\xf8\x00\x00\x00\x00\x00\x00\x85K\x02u.",
            "{(f:7ff8000000000000): 1, (f:7ff8000000000000): 2}",
        ),
        // frozenset({(1,)})
        (b"\x80\x04(K\x01\x85K\x01\x85\x91.", "frozenset{(1)}"),
        // t = (1,); {t: 1, t: 2, (1,): 3} is {(1,): 3}
        (
            b"}(K\x01\x85q\x00K\x01h\x00K\x02K\x01\x85K\x03u.",
            "{(1): 3}",
        ),
    ];
    for (data, want) in cases {
        assert_eq!(rendered(data), *want, "{:?}", String::from_utf8_lossy(data));
    }
}

/// A tuple used as a key again and again is read once: a pickle of a
/// tuple of 100,000 items used as a key 100,000 times loads at once, one
/// key, whether the tuple compares by content or (a `NaN` at its end) by
/// identity.
#[test]
fn a_huge_tuple_key_used_often_is_read_once() {
    for last in [&b"K\x07"[..], b"G\x7f\xf8\x00\x00\x00\x00\x00\x00"] {
        a_huge_tuple_key(last);
    }
}

fn a_huge_tuple_key(last: &[u8]) {
    let mut data = b"\x80\x04}(".to_vec();
    data.extend(b"(");
    for _ in 0..99_999 {
        data.extend(b"K\x07");
    }
    data.extend(last);
    data.extend(b"t\x94");
    for i in 0..100_000u32 {
        if i > 0 {
            data.extend(b"h\x00");
        }
        data.extend(b"K\x01");
    }
    data.extend(b"u.");
    let p = load(&data).unwrap_or_else(|e| panic!("{e:?}"));
    let Node::Dict(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a dict")
    };
    assert_eq!(items.len(), 1);
}

/// A key equal to one in another dict stays its own object (Python keeps
/// the key it is given; only within one dict is the first kept): `o =
/// ({(1,): 0}, {t: 0}, t)` with `t` a second `(1,)`, the second dict's key
/// `t` itself.
#[test]
fn a_tuple_key_keeps_its_own_object() {
    let p = load(b"\x80\x04(}K\x01\x85K\x00s}K\x01\x85\x94K\x00sh\x00t.").unwrap();
    let Node::Tuple(o) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a tuple")
    };
    let key = |v: &Value<Tag>| match p.graph.get(v.as_node().unwrap()) {
        Node::Dict(items) => items[0].0.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(key(&o[1]), o[2]);
    assert_ne!(key(&o[0]), o[2]);
}

/// Whether equal tuples are one item does not depend on the order they
/// are seen in: a tuple nested past the depth compared is one item, and
/// the tuple inside it, used again, equals an equal tuple after it (as
/// `pickle.loads` gives: two items).
#[test]
fn equal_tuples_are_one_item_in_any_order() {
    let mut data = b"\x80\x04\x8f(K\x01\x85\x94".to_vec();
    data.extend([b'\x85'; 16]);
    data.extend(b"K\x01\x85h\x00\x90.");
    let p = load(&data).unwrap();
    let Node::Set(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a set")
    };
    assert_eq!(items.len(), 2);
}

/// A tuple holding one long string many times, used as an item, costs the
/// string's length once, not once per copy: 4,000 copies of 1 MiB (4 GiB to
/// hash a copy at a time) load at once, one item.
#[test]
fn a_tuple_of_a_long_string_is_hashed_once() {
    let mut data = b"\x80\x04\x8f(".to_vec();
    data.push(b'X');
    data.extend((1u32 << 20).to_le_bytes());
    data.extend(vec![b's'; 1 << 20]);
    data.extend(b"\x94(");
    for _ in 0..4000 {
        data.extend(b"h\x00");
    }
    data.extend(b"th\x00\x90.");
    let p = load(&data).unwrap();
    let Node::Set(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a set")
    };
    assert_eq!(items.len(), 2);
}

/// A tuple a hook put in a set (`set([t])`) is registered before the set is
/// indexed: added again after an equal tuple became canonical elsewhere, it
/// is found, one item (`pickle.loads`: `{(1,), 5}`).
#[test]
fn a_tuple_a_hook_put_in_a_set_is_found() {
    let data = b"\x80\x04(}K\x01\x85K\x00scbuiltins\nset\n]K\x01\x85\x94a\x85R\x94(K\x05\x90}h\x00K\x00sh\x01(h\x00\x90t.";
    let p = load(data).unwrap();
    let Node::Tuple(o) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a tuple")
    };
    let Node::Set(items) = p.graph.get(o[1].as_node().unwrap()) else {
        panic!("a set")
    };
    assert_eq!(items.len(), 2, "{items:?}");
}

/// The depth compared is tuples in tuples: a tuple holding a frozenset
/// nested 17 deep (one object, through the memo) is one key with an equal
/// tuple, as `pickle.loads` gives.
#[test]
fn a_deep_item_that_is_no_tuple_does_not_count() {
    let mut data = b"\x80\x04}(".to_vec();
    data.extend([b'('; 17]);
    data.extend([b'\x91'; 17]);
    data.extend(b"\x94\x85K\x01h\x00\x85K\x02u.");
    let p = load(&data).unwrap();
    let Node::Dict(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a dict")
    };
    assert_eq!(items.len(), 1);
}

/// Items a hook put in a set are taken in before the machine's next item,
/// whatever that item is (one that equals nothing, a `NaN`, included):
/// `pickle.loads` gives `{(1,), nan}`.
#[test]
fn a_hooks_items_are_taken_in_before_the_next() {
    let data = b"\x80\x04cbuiltins\nset\n](K\x01\x85e\x85R(G\x7f\xf8\x00\x00\x00\x00\x00\x00\x90(K\x01\x85\x90.";
    let p = load(data).unwrap();
    let Node::Set(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a set")
    };
    assert_eq!(items.len(), 2, "{items:?}");
}

/// A set a hook filled with 20,000 items, then given 20,000 empty
/// `ADDITEMS`: the index takes the hook's items in once, not once a batch
/// (which took 25 s in a debug build).
#[test]
fn empty_batches_after_a_hook_cost_nothing() {
    let mut data = b"cbuiltins\nset\n](".to_vec();
    for i in 0..20_000u32 {
        data.push(b'J');
        data.extend(i.to_le_bytes());
    }
    data.extend(b"e\x85R");
    for _ in 0..20_000 {
        data.extend(b"(\x90");
    }
    data.push(b'.');
    let p = load(&data).unwrap();
    let Node::Set(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a set")
    };
    assert_eq!(items.len(), 20_000);
}

/// A long string equal to a key already seen, but another object, used as
/// a key and in tuple keys again and again through the memo: hashed once,
/// not once a use (3 ms a use for 1 MiB before). `pickle.loads`: two keys,
/// the string and the tuple.
#[test]
fn an_equal_copy_of_a_long_key_is_hashed_once() {
    let mut string = vec![b'X'];
    string.extend((1u32 << 20).to_le_bytes());
    string.extend(vec![b's'; 1 << 20]);
    let mut data = b"}".to_vec();
    data.extend(&string);
    data.extend(b"K\x00s(");
    data.extend(&string);
    data.extend(b"\x94K\x01");
    for _ in 0..2000 {
        data.extend(b"h\x00\x85K\x02h\x00K\x03");
    }
    data.extend(b"u.");
    let p = load(&data).unwrap();
    let Node::Dict(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!("a dict")
    };
    assert_eq!(items.len(), 2);
}

/// Keys on either side of the length where keys stop being compared by
/// content and start being interned: equal ones are one key, unequal ones
/// two, and a frozenset keeps the first of equal items in order.
#[test]
fn equal_keys_of_every_length_are_one_key() {
    let unicode = |s: &str| {
        let mut v = vec![b'X'];
        v.extend_from_slice(&(s.len() as u32).to_le_bytes());
        v.extend_from_slice(s.as_bytes());
        v
    };
    for len in [1, 63, 64, 65, 200] {
        let (a, b) = ("a".repeat(len), "b".repeat(len));
        // {a: 1, b: 2, a: 3} by SETITEMS, and frozenset((b, a, b, a)).
        let mut dict = b"}(".to_vec();
        for (k, v) in [(&a, 1u8), (&b, 2), (&a, 3)] {
            dict.extend(unicode(k));
            dict.extend([b'K', v]);
        }
        dict.extend(b"u.");
        assert_eq!(
            rendered(&dict),
            format!("{{'{a}': 3, '{b}': 2}}"),
            "keys of {len}"
        );
        let mut set = b"\x80\x04(".to_vec();
        for k in [&b, &a, &b, &a] {
            set.extend(unicode(k));
        }
        set.extend(b"\x91.");
        assert_eq!(
            rendered(&set),
            format!("frozenset{{'{b}', '{a}'}}"),
            "items of {len}"
        );
    }
}

#[test]
fn long_string_and_bytes_opcodes() {
    let mut data = vec![b'(', b'B', 0, 1, 0, 0];
    data.extend(0..=255u8);
    data.extend([b'X', 44, 1, 0, 0]);
    data.extend([b'x'; 300]);
    data.extend(*b"C\x01zt.");
    let p = load(&data).unwrap();
    let Node::Tuple(items) = p.graph.get(p.root.as_node().unwrap()) else {
        panic!()
    };
    assert_eq!(
        items[0].as_bytes().unwrap(),
        (0..=255u8).collect::<Vec<_>>()
    );
    assert_eq!(items[1].as_str().unwrap(), "x".repeat(300));
    assert_eq!(items[2].as_bytes().unwrap(), b"z");
}

#[test]
fn stops_at_stop_and_reports_consumed() {
    let data = b"\x80\x02K\x01.K\x02.";
    let first = load(data).unwrap();
    assert_eq!(
        (first.root.clone(), first.consumed, first.protocol),
        (Value::Int(1), 5, 2)
    );
    let second = load(&data[first.consumed..]).unwrap();
    assert_eq!(
        (second.root, second.consumed, second.protocol),
        (Value::Int(2), 3, 0)
    );
}

#[test]
fn typed_errors() {
    use PickleError::*;
    #[rustfmt::skip]
    let cases: &[(&[u8], PickleError)] = &[
        (b"\x80\x02\xff", UnknownOpcode { byte: 0xff, offset: 2 }),
        (b"\x80\x02a.", StackUnderflow { opcode: "APPEND", offset: 2 }),
        (b"K\x01(a.", StackUnderflow { opcode: "APPEND", offset: 3 }),
        (b"K\x01(.", StackUnderflow { opcode: "STOP", offset: 3 }),
        (b"0", StackUnderflow { opcode: "POP", offset: 0 }),
        (b"}K\x01a.", WrongTarget { opcode: "APPEND", expected: "list", offset: 3 }),
        (b"c__main__\nC\nK\x01a.", WrongTarget { opcode: "APPEND", expected: "list", offset: 14 }),
        (b"]K\x01K\x02s.", WrongTarget { opcode: "SETITEM", expected: "dict", offset: 5 }),
        (b"](K\x01\x90.", WrongTarget { opcode: "ADDITEMS", expected: "set", offset: 4 }),
        (b"\x80\x02\x82\x01.", Unsupported { opcode: "EXT1", offset: 2 }),
        (b"\x80\x02\x83\x34\x12.", Unsupported { opcode: "EXT2", offset: 2 }),
        (b"\x80\x02\x84\x78\x56\x34\x12.", Unsupported { opcode: "EXT4", offset: 2 }),
        (b"\x80\x05\x97\x98.", Unsupported { opcode: "NEXT_BUFFER", offset: 2 }),
        (b"K\x01t.", NoMark { opcode: "TUPLE", offset: 2 }),
        (b"h\x05.", MemoMissing { index: 5, offset: 0 }),
        (b"g7\n.", MemoMissing { index: 7, offset: 0 }),
        (b"", NoStop { offset: 0 }),
        (b"K\x01", NoStop { offset: 2 }),
        (b"X\xff\x00\x00\x00ab", Truncated { offset: 5, needed: 255, available: 2 }),
        (b"J\x01\x02", Truncated { offset: 1, needed: 4, available: 2 }),
        // BINUNICODE8 claiming 2^60 bytes
        (b"\x8d\x00\x00\x00\x00\x00\x00\x00\x10ab.", Truncated { offset: 9, needed: 1 << 60, available: 3 }),
        (b"\x8e\xff\xff\xff\xff\xff\xff\xff\xff.", Truncated { offset: 9, needed: u64::MAX, available: 1 }),
        (b"\x96\xff\xff\xff\xff\xff\xff\xff\x7f.", Truncated { offset: 9, needed: i64::MAX as u64, available: 1 }),
        (b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00K\x01.", Truncated { offset: 11, needed: 16, available: 3 }),
        (b"I12", UnterminatedLine { offset: 1 }),
        (b"Iabc\n.", BadText { what: "int", offset: 0 }),
        (b"L1.5L\n.", BadText { what: "long", offset: 0 }),
        (b"Fx\n.", BadText { what: "float", offset: 0 }),
        (b"S'abc\n.", BadText { what: "string quotes", offset: 0 }),
        (b"S'a\\x4'\n.", BadText { what: "string escape", offset: 0 }),
        // A Python 2 str that is not UTF-8 (torch.load: UnicodeDecodeError).
        (b"U\x01\xff.", BadText { what: "utf-8 (a Python 2 str)", offset: 0 }),
        (b"K\x01T\x02\x00\x00\x00\xc3(.", BadText { what: "utf-8 (a Python 2 str)", offset: 2 }),
        (b"S'\\xff'\n.", BadText { what: "utf-8 (a Python 2 str)", offset: 0 }),
        (b"V\\u12\n.", BadText { what: "unicode escape", offset: 0 }),
        (b"V\\ud800\n.", BadText { what: "unicode escape", offset: 0 }),
        (b"V\\U00110000\n.", BadText { what: "unicode escape", offset: 0 }),
        (b"X\x01\x00\x00\x00\xff.", BadText { what: "utf-8", offset: 0 }),
        (b"T\xff\xff\xff\xff.", BadText { what: "negative length", offset: 0 }),
        (b"\x8b\xff\xff\xff\xff.", BadText { what: "negative length", offset: 0 }),
        (b"Np-1\n.", BadText { what: "memo index", offset: 1 }),
        (b"P\xff\n.", BadText { what: "persistent id", offset: 0 }),
        (b"c\xff\nx\n.", BadText { what: "utf-8", offset: 0 }),
        (b"}(K\x01u.", OddItems { opcode: "SETITEMS", offset: 4 }),
        (b"(K\x01d.", OddItems { opcode: "DICT", offset: 3 }),
        (b"\x80\x04K\x01K\x02\x93.", WrongOperand { opcode: "STACK_GLOBAL", expected: "str", offset: 6 }),
        (b"c__main__\nC\nK\x01R.", WrongOperand { opcode: "REDUCE", expected: "tuple", offset: 14 }),
        (b"c__main__\nC\n)K\x01\x92.", WrongOperand { opcode: "NEWOBJ_EX", expected: "dict", offset: 15 }),
        (b"\x80\x06.", UnsupportedProtocol { protocol: 6, offset: 0 }),
    ];
    for (data, want) in cases {
        assert_eq!(&err(data), want, "{:?}", String::from_utf8_lossy(data));
    }
    let huge = format!("I{}\n.", "9".repeat(MAX_INT_DIGITS + 1));
    assert_eq!(
        err(huge.as_bytes()),
        BadText {
            what: "int",
            offset: 0
        }
    );
    let ok = format!("I{}\n.", "9".repeat(MAX_INT_DIGITS));
    assert!(matches!(
        load(ok.as_bytes()).unwrap().root,
        Value::BigInt(_)
    ));
}

#[test]
fn refuses_newobj_ex_with_kwargs() {
    // pickle.dumps(E(), 4) where E.__getnewargs_ex__ returns ((), {'k': 1})
    let data =
        unhex("8004951e000000000000008c085f5f6d61696e5f5f948c0145949394297d948c016b944b017392942e");
    assert_eq!(
        err(&data),
        PickleError::Unsupported {
            opcode: "NEWOBJ_EX",
            offset: 38
        }
    );
}

#[test]
fn hook_errors_pass_through() {
    let e = load(b"cos\nsystem\n.").unwrap_err();
    assert_eq!(e, TestError::Hook("refused os.system".into()));
}

/// Hooks that hand back node ids the graph does not have.
struct Dangling;

impl Hooks for Dangling {
    type Ext = ();
    type Error = PickleError;
    fn find_class(&mut self, _: &str, _: &str) -> Result<Value<()>, PickleError> {
        Ok(Value::Node(NodeId(99)))
    }
    fn persistent_load(
        &mut self,
        _: &mut Graph<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(Value::None)
    }
    fn reduce(
        &mut self,
        _: &mut Graph<()>,
        _: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(Value::None)
    }
    fn build(
        &mut self,
        _: &mut Graph<()>,
        o: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(o)
    }
    fn new_obj(
        &mut self,
        _: &mut Graph<()>,
        _: Value<()>,
        _: Value<()>,
    ) -> Result<Value<()>, PickleError> {
        Ok(Value::None)
    }
}

#[test]
fn dangling_node_from_hook_is_an_error() {
    let e = unpickle(b"ca\nb\n.", &mut Dangling, &Limits::default()).unwrap_err();
    assert_eq!(e, PickleError::DanglingNode { id: 99, offset: 0 });
}

fn limit(e: PickleError) -> (&'static str, usize) {
    match e {
        PickleError::LimitExceeded { limit, value, .. } => (limit, value),
        e => panic!("expected a limit error, got {e:?}"),
    }
}

#[test]
fn deep_nesting_is_a_depth_error() {
    let n = 100_000;
    let tuples = [&b")"[..], &vec![op::TUPLE1; n], b"."].concat();
    assert_eq!(limit(err(&tuples)), ("max_depth", 1001));
    let marked_lists = [vec![op::MARK; n], vec![op::LIST; n], vec![op::STOP]].concat();
    assert_eq!(limit(err(&marked_lists)), ("max_depth", 1001));
    let appended = [
        vec![op::EMPTY_LIST; n],
        vec![op::APPEND; n - 1],
        vec![op::STOP],
    ]
    .concat();
    assert_eq!(limit(err(&appended)), ("max_depth", 1001));
    // d = {}; for _ in range(n): d = {None: d}
    let dicts = [
        b"}N".repeat(n - 1),
        b"}".to_vec(),
        vec![op::SETITEM; n - 1],
        vec![op::STOP],
    ];
    let dicts = dicts.concat();
    assert_eq!(limit(err(&dicts)), ("max_depth", 1001));
}

#[test]
fn self_reference_does_not_deepen() {
    let data = [&b"]"[..], &b"2a".repeat(5000), b"."].concat();
    let p = load(&data).unwrap();
    assert_eq!(p.graph.depth(p.root.as_node().unwrap()), 1);
}

#[test]
fn memo_sharing_keeps_doubling_small() {
    // x = []; for _ in range(60): x = (x, x)
    let data = [
        &b"]q\x00"[..],
        &b"h\x00h\x00\x86q\x000".repeat(60),
        b"h\x00.",
    ]
    .concat();
    let p = load(&data).unwrap();
    assert_eq!(p.graph.len(), 61);
    let root = p.root.as_node().unwrap();
    assert_eq!(p.graph.depth(root), 61);
    let Node::Tuple(pair) = p.graph.get(root) else {
        panic!()
    };
    assert_eq!(pair[0], pair[1]);
}

#[test]
fn nodes_a_hook_releases_give_their_ids_to_the_next_ones() {
    // [consume({'a': 1}), {'b': 1, 'a': 2, 'b': 3}]: the second dict takes
    // the first's id, and nothing noted of the first (where its key 'a'
    // sat) applies to it.
    let data = [
        &b"\x80\x02](ctest\nconsume\n}X\x01\x00\x00\x00aK\x01s\x85R"[..],
        b"}(X\x01\x00\x00\x00bK\x01X\x01\x00\x00\x00aK\x02X\x01\x00\x00\x00bK\x03ue.",
    ]
    .concat();
    let p = load(&data).unwrap();
    assert_eq!(render(&p.graph, &p.root), "[None, {'b': 3, 'a': 2}]");
    assert_eq!(p.graph.len(), 2);
    // A tensor per entry, as torch.save writes a state dict: the argument
    // tuples go as each is consumed, and the graph stays the dict.
    let entry = b"X\x01\x00\x00\x00kctest\nconsume\n(K\x01\x85K\x02\x85)t\x85R";
    let data = [&b"\x80\x02}("[..], &entry.repeat(1000), b"u."].concat();
    let p = load(&data).unwrap();
    assert_eq!(p.graph.len(), 1);
}

#[test]
fn only_memo_entries_the_stream_reads_are_stored() {
    // Five entries written, none read: nothing stored, no memo limit reached.
    let memo = Limits {
        max_memo: 1,
        scale: false,
        ..Limits::default()
    };
    let data = b"(K\x01q\x00q\x01q\x02q\x03q\x04t.";
    assert!(unpickle(data, &mut TestHooks, &memo).is_ok());
    // MEMOIZE numbers entries by count, also when the unread ones are skipped.
    let p = load(b"\x80\x04N\x94K\x05\x94K\x06\x94h\x01h\x02\x86.").unwrap();
    assert_eq!(render(&p.graph, &p.root), "(5, 6)");
    // With the scan off, every entry is stored and counts.
    let all = Limits {
        scan_memo: false,
        ..memo
    };
    assert!(unpickle(data, &mut TestHooks, &all).is_err());
    // PUT mixed with MEMOIZE: no plan, every entry stored, numbered by distinct count.
    let p = load(b"\x80\x04Nq\x05K\x07\x94h\x01.").unwrap();
    assert_eq!(render(&p.graph, &p.root), "7");
}

#[test]
fn limits_are_enforced() {
    // Fixed limits: these streams are far shorter than the floors.
    let small = |f: fn(&mut Limits)| {
        let mut l = Limits::default().with_scale(false);
        f(&mut l);
        l
    };
    let memo = small(|l| l.max_memo = 2);
    assert_eq!(
        // Only entries the stream reads count (and are stored).
        limit(err_with(
            b"K\x01q\x00q\x01q\x00q\x02h\x00h\x01h\x02.",
            &memo
        )),
        ("max_memo", 3)
    );
    let stack = small(|l| l.max_stack = 3);
    assert_eq!(limit(err_with(b"NNNN.", &stack)), ("max_stack", 4));
    assert_eq!(limit(err_with(b"((((.", &stack)), ("max_stack", 4));
    let nodes = small(|l| l.max_nodes = 2);
    assert_eq!(limit(err_with(b"]]].", &nodes)), ("max_nodes", 3));
    // The hook's object node counts too.
    let nodes = small(|l| l.max_nodes = 1);
    assert_eq!(
        limit(err_with(b"c__main__\nC\n)R.", &nodes)),
        ("max_nodes", 2)
    );
}

#[test]
fn every_prefix_of_a_real_pickle_is_an_error() {
    for f in FIXTURES {
        let data = unhex(f.hex);
        for n in 0..data.len() {
            assert!(load(&data[..n]).is_err(), "{} prefix {n}", f.name);
        }
    }
}

/// What a read gives, comparable (`NaN` is not equal to itself in a graph).
fn outcome(r: Result<Pickled<Tag>, TestError>) -> Result<(String, u8, usize), TestError> {
    r.map(|p| (render(&p.graph, &p.root), p.protocol, p.consumed))
}

/// A pickle read through a sliding window is read as it is whole: the same
/// objects, or the same error at the same offset, however the windows cut
/// the opcodes and their arguments; the prefixes end inside every one.
#[test]
fn windows_read_what_the_whole_stream_reads() {
    for f in FIXTURES {
        let data = unhex(f.hex);
        for n in 0..=data.len() {
            let whole = outcome(load(&data[..n]));
            for chunk in [1, 2, 3, 7, 64] {
                assert_eq!(
                    outcome(load_windowed(&data[..n], chunk)),
                    whole,
                    "{} prefix {n}, windows of {chunk}",
                    f.name
                );
            }
        }
    }
}

/// A reader's failure is the load's error, whatever the pickle it cut.
#[test]
fn a_readers_error_is_the_error() {
    struct Cut<'a>(&'a [u8]);
    impl std::io::Read for Cut<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::other("the disk went away"));
            }
            let n = buf.len().min(self.0.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let data = unhex(FIXTURES[0].hex);
    for cut in 0..data.len() {
        let open = || Ok::<_, std::io::Error>(Cut(&data[..cut]));
        let got = unpickle_windows(data.len(), 4, open, &mut TestHooks, &Limits::default());
        assert_eq!(
            got,
            Err(TestError::Io("the disk went away".into())),
            "cut at {cut}"
        );
    }
}

/// Bytes that are opcodes or common arguments, to reach deep states.
fn alphabet() -> Vec<u8> {
    let mut a: Vec<u8> = op::ALL.iter().map(|o| o.byte).collect();
    a.extend(b"\n\x00\x01\x02\xff019-L'\\xu");
    a
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = load(&data);
    }

    #[test]
    fn windows_read_random_streams_as_the_whole(
        data in proptest::collection::vec(proptest::sample::select(alphabet()), 0..512),
        chunk in 1..40usize,
    ) {
        prop_assert_eq!(outcome(load_windowed(&data, chunk)), outcome(load(&data)));
    }

    #[test]
    fn random_opcode_streams_never_panic(
        data in proptest::collection::vec(proptest::sample::select(alphabet()), 0..512)
    ) {
        let _ = load(&data);
    }

    #[test]
    fn mutated_pickles_never_panic(
        which in 0..FIXTURES.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..8),
    ) {
        let mut data = unhex(FIXTURES[which].hex);
        for (at, byte, kind) in edits {
            let at = at % (data.len() + 1);
            match kind {
                0 if at < data.len() => data[at] = byte,
                1 => data.insert(at, byte),
                _ if at < data.len() => { data.remove(at); }
                _ => {}
            }
        }
        prop_assert_eq!(
            outcome(load_windowed(&data, 1 + data.len() % 13)),
            outcome(load(&data))
        );
        if let Ok(p) = load(&data) {
            // Whatever it read, the writer can write and the reader re-read.
            let out = super::super::dumps(&p.graph, &p.root, |p, t| match t {
                Tag::Global(_) | Tag::Obj(_) | Tag::Pid(_) => p.none(),
            });
            let _ = out.map(|out| load(&out));
        }
    }
}

/// Limits scale with the stream (issue 44, item 1): a valid stream is never
/// refused for its size, whatever floor is set; with the scaling off, the
/// floor is the limit.
#[test]
fn limits_scale_with_the_streams_length() {
    // A list of 300 empty dicts: 301 nodes, 2 bytes each (`}` and `a`).
    let mut data = b"\x80\x02]q\x00(".to_vec();
    for _ in 0..300 {
        data.extend_from_slice(b"}");
    }
    data.extend_from_slice(b"e.");
    let floor = Limits {
        max_nodes: 10,
        max_stack: 10,
        ..Limits::default()
    };
    assert!(floor.scale);
    let p = unpickle(&data, &mut TestHooks, &floor).expect("scaled to the stream");
    assert_eq!(p.graph.len(), 301);
    let fixed = floor.with_scale(false);
    assert!(matches!(
        unpickle(&data, &mut TestHooks, &fixed),
        Err(TestError::Pickle(PickleError::LimitExceeded { .. }))
    ));
    // Scaled to the stream's length and no further: a stream cannot build
    // more than NODES_PER_BYTE nodes a byte.
    let scaled = floor.for_stream(data.len());
    assert_eq!(scaled.max_nodes, data.len() * NODES_PER_BYTE);
    assert_eq!((scaled.max_memo, scaled.max_stack), (1 << 20, data.len()));
    assert_eq!(Limits::default().for_stream(10), Limits::default());
    assert_eq!(fixed.for_stream(1 << 30), fixed);
}
