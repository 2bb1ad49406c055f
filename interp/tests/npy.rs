//! `.npy` reading and writing: NumPy's own layout, every supported dtype, malformed files.

use half::f16;
use proptest::prelude::*;
use tir_interp::npy::{read, write, NpyError};
use tir_interp::{Data, Tensor};
use tir_ir::{DType, TensorType};

/// A file as `numpy.save` writes it (version 1.0, header padded to 64 bytes).
fn numpy_file(header: &str, data: &[u8]) -> Vec<u8> {
    file_with(1, header, data)
}

fn file_with(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let prefix = if major == 1 { 10 } else { 12 };
    let mut h = header.to_string();
    while (prefix + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[major, 0]);
    if major == 1 {
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(h.as_bytes());
    out.extend_from_slice(data);
    out
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn reads_a_numpy_f32_file() {
    let f = numpy_file(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        &f32_bytes(&[0., 1., 2., 3., 4., 5.]),
    );
    let t = read(&f).unwrap();
    assert_eq!(t.ty, TensorType::f32([2, 3]));
    assert_eq!(t.as_f32().unwrap(), [0., 1., 2., 3., 4., 5.]);
}

#[test]
fn writes_what_numpy_writes() {
    let t = Tensor::f32([2, 3], vec![0., 1., 2., 3., 4., 5.]).unwrap();
    let expected = numpy_file(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        &f32_bytes(&[0., 1., 2., 3., 4., 5.]),
    );
    assert_eq!(write(&t).unwrap(), expected);
}

#[test]
fn scalars_and_vectors_use_python_tuple_syntax() {
    let s = write(&Tensor::f32([], vec![1.5]).unwrap()).unwrap();
    assert!(String::from_utf8_lossy(&s).contains("'shape': (), }"));
    let v = write(&Tensor::f32([3], vec![1., 2., 3.]).unwrap()).unwrap();
    assert!(String::from_utf8_lossy(&v).contains("'shape': (3,), }"));
    assert_eq!(read(&s).unwrap().ty, TensorType::f32([]));
    assert_eq!(read(&v).unwrap().ty, TensorType::f32([3]));
}

#[test]
fn reads_version_2_headers_and_loose_spacing() {
    let f = file_with(
        2,
        "{\"shape\":(2,),\"fortran_order\":False,\"descr\":\"<i8\"}",
        &[1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0],
    );
    let t = read(&f).unwrap();
    assert_eq!(t.data, Data::I64(vec![1, 2]));
}

#[test]
fn reads_big_endian_data() {
    let f = numpy_file(
        "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
        &1.5f32.to_be_bytes(),
    );
    assert_eq!(read(&f).unwrap().as_f32().unwrap(), [1.5]);
}

#[test]
fn every_ir_dtype_but_bf16_round_trips() {
    let cases = [
        Data::F32(vec![1.0, -2.5]),
        Data::F16(vec![f16::from_f32(0.5), f16::from_f32(-3.0)]),
        Data::I8(vec![-128, 127]),
        Data::U8(vec![0, 255]),
        Data::I32(vec![i32::MIN, 7]),
        Data::I64(vec![i64::MAX, -1]),
        Data::Bool(vec![true, false]),
    ];
    for data in cases {
        let t = Tensor::new(TensorType::new([2], data.dtype()), data).unwrap();
        assert_eq!(read(&write(&t).unwrap()).unwrap(), t);
    }
    let bf = Tensor::new(
        TensorType::new([1], DType::BF16),
        Data::BF16(vec![half::bf16::ONE]),
    )
    .unwrap();
    assert_eq!(write(&bf), Err(NpyError::Unrepresentable(DType::BF16)));
}

#[test]
fn fortran_order_is_rejected() {
    let f = numpy_file(
        "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
        &f32_bytes(&[1.]),
    );
    assert_eq!(read(&f), Err(NpyError::FortranOrder));
}

#[test]
fn unsupported_dtypes_are_named() {
    let f = numpy_file(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
        &[0; 8],
    );
    assert_eq!(read(&f), Err(NpyError::DType("<f8".into())));
    let f = numpy_file(
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
        &[0; 4],
    );
    assert!(read(&f).is_err());
}

#[test]
fn data_of_the_wrong_length_is_rejected() {
    let f = numpy_file(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
        &f32_bytes(&[1., 2.]),
    );
    assert_eq!(
        read(&f),
        Err(NpyError::DataLength {
            shape: vec![3],
            expected: 12,
            found: 8
        })
    );
    // A huge shape with little data fails before allocating anything.
    let f = numpy_file(
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
        &[0; 4],
    );
    assert!(matches!(read(&f), Err(NpyError::DataLength { .. })));
}

#[test]
fn malformed_headers_are_errors() {
    for header in [
        "",
        "{",
        "{'descr': '<f4'}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 'a'), }",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } trailing",
    ] {
        assert!(
            matches!(read(&numpy_file(header, &[0; 4])), Err(NpyError::Header(_))),
            "{header}"
        );
    }
    assert_eq!(read(b"PK\x03\x04 not npy"), Err(NpyError::BadMagic));
    assert_eq!(read(b"\x93NUMPY\x09\x00xxxx"), Err(NpyError::Version(9, 0)));
    assert_eq!(
        read(b"\x93NUMPY\x01\x00\xff\x00{"),
        Err(NpyError::Truncated)
    );
}

fn arb_tensor() -> impl Strategy<Value = Tensor> {
    let shape = prop::collection::vec(0u64..4, 0..4);
    (shape, 0usize..7, any::<u64>()).prop_map(|(shape, d, seed)| {
        let n: u64 = shape.iter().product();
        let mut s = seed;
        let mut next = || {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            s
        };
        let data = match d {
            0 => Data::F32((0..n).map(|_| (next() >> 40) as f32 - 8e6).collect()),
            1 => Data::F16(
                (0..n)
                    .map(|_| f16::from_bits((next() >> 48) as u16 & 0x7bff))
                    .collect(),
            ),
            2 => Data::I8((0..n).map(|_| next() as i8).collect()),
            3 => Data::U8((0..n).map(|_| next() as u8).collect()),
            4 => Data::I32((0..n).map(|_| next() as i32).collect()),
            5 => Data::I64((0..n).map(|_| next() as i64).collect()),
            _ => Data::Bool((0..n).map(|_| next() & 1 == 1).collect()),
        };
        Tensor::new(TensorType::new(shape, data.dtype()), data).unwrap()
    })
}

proptest! {
    #[test]
    fn write_then_read_is_the_identity(t in arb_tensor()) {
        prop_assert_eq!(read(&write(&t).unwrap()).unwrap(), t);
    }

    #[test]
    fn corrupted_files_never_panic(t in arb_tensor(), edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8), cut in any::<prop::sample::Index>()) {
        let mut f = write(&t).unwrap();
        for (i, b) in edits {
            let i = i.index(f.len());
            f[i] = b;
        }
        let _ = read(&f);
        let _ = read(&f[..cut.index(f.len() + 1)]);
    }

    #[test]
    fn arbitrary_headers_never_panic(header in "\\PC{0,80}", data in prop::collection::vec(any::<u8>(), 0..16)) {
        let _ = read(&numpy_file(&header, &data));
        let _ = read(&file_with(2, &header, &data));
    }
}
