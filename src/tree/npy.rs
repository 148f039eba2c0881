//! `array.npy` and `table.npy`: the array as one NPY file, assembled from the chunks it spans
//! (placeholder while the NPY core lands: the view creates no such files yet).

use super::{Tree, TreeError};
use crate::reader::{ArrayId, ReadData, ReadHint};

impl Tree {
    pub(crate) fn npy_read(
        &self,
        _ino: u64,
        _array: ArrayId,
        _offset: u64,
        _size: u32,
        _hint: ReadHint,
    ) -> Result<ReadData, TreeError> {
        Err(TreeError::NotFound)
    }

    pub(crate) fn table_npy_read(
        &self,
        _ino: u64,
        _offset: u64,
        _size: u32,
        _hint: ReadHint,
    ) -> Result<ReadData, TreeError> {
        Err(TreeError::NotFound)
    }

    pub(crate) fn npy_size(&self, _array: ArrayId) -> u64 {
        0
    }

    pub(crate) fn table_npy_size(&self) -> u64 {
        0
    }

    pub(crate) fn npy_write(
        &self,
        _ino: u64,
        _array: ArrayId,
        _offset: u64,
        _data: &[u8],
    ) -> Result<(), TreeError> {
        Err(TreeError::NotFound)
    }

    pub(crate) fn npy_set_size(&self, _array: ArrayId, _size: u64) -> Result<(), TreeError> {
        Err(TreeError::NotFound)
    }

    pub(crate) fn npy_changed(&self, _array: ArrayId) {}
}
