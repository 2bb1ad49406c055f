//! The tir tensor IR.
