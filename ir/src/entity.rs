//! Small typed indices into arenas (naga's `Handle<T>`, Cranelift's `PrimaryMap`).
//!
//! Entities are `Copy` u32 newtypes; the data lives in an [`EntityVec`] owned by the function.
//! Side tables (shapes, liveness, offsets) are plain vectors or maps keyed by the same ids.

use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// An index type usable as a key into an [`EntityVec`].
pub trait EntityRef: Copy + Eq {
    fn new(index: usize) -> Self;
    fn index(self) -> usize;
}

macro_rules! entity {
    ($(#[$meta:meta])* $name:ident, $prefix:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(u32);

        impl EntityRef for $name {
            fn new(index: usize) -> Self {
                // Arenas never approach 2^32 entries: a function with four billion ops would not
                // fit in memory long before.
                $name(u32::try_from(index).expect("entity index exceeds u32"))
            }
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    /// An SSA value: a function parameter or an op result.
    Value,
    "%v"
);
entity!(
    /// An operation in a function's op arena. Its position in the execution order is kept
    /// apart, in `Function::layout`.
    OpId,
    "op"
);

/// A dense arena keyed by an entity type.
#[derive(Clone, PartialEq)]
pub struct EntityVec<K, V> {
    items: Vec<V>,
    _key: PhantomData<K>,
}

impl<K: EntityRef, V> EntityVec<K, V> {
    pub fn new() -> Self {
        EntityVec {
            items: Vec::new(),
            _key: PhantomData,
        }
    }

    pub fn push(&mut self, value: V) -> K {
        let key = K::new(self.items.len());
        self.items.push(value);
        key
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    pub fn get(&self, key: K) -> Option<&V> {
        self.items.get(key.index())
    }

    pub fn keys(&self) -> impl ExactSizeIterator<Item = K> + '_ {
        (0..self.items.len()).map(K::new)
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = (K, &V)> + '_ {
        self.items.iter().enumerate().map(|(i, v)| (K::new(i), v))
    }

    pub fn values(&self) -> impl ExactSizeIterator<Item = &V> + '_ {
        self.items.iter()
    }
}

impl<K: EntityRef, V> Default for EntityVec<K, V> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: EntityRef, V> Index<K> for EntityVec<K, V> {
    type Output = V;
    fn index(&self, key: K) -> &V {
        &self.items[key.index()]
    }
}

impl<K: EntityRef, V> IndexMut<K> for EntityVec<K, V> {
    fn index_mut(&mut self, key: K) -> &mut V {
        &mut self.items[key.index()]
    }
}

impl<K: EntityRef + fmt::Debug, V: fmt::Debug> fmt::Debug for EntityVec<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}
