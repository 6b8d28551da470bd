//! OFPT_FEATURES_REPLY, OFPT_GET_CONFIG_REPLY / OFPT_SET_CONFIG and OFPT_ROLE_REQUEST / _REPLY.

use crate::error::Result;
use crate::wire::Reader;
use bytes::{BufMut, BytesMut};

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct FeaturesReply {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
    pub reserved: u32,
}

/// GET_CONFIG_REPLY / SET_CONFIG body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

/// ROLE_REQUEST / ROLE_REPLY body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Role {
    /// 0 nochange, 1 equal, 2 primary, 3 secondary.
    pub role: u32,
    pub generation_id: u64,
}

impl FeaturesReply {
    /// Body length (OF1.3+: no port list).
    pub const LEN: usize = 24;

    pub fn parse(body: &[u8]) -> Result<FeaturesReply> {
        let mut r = Reader::new(body, "ofp_switch_features");
        let v = FeaturesReply {
            datapath_id: r.u64()?,
            n_buffers: r.u32()?,
            n_tables: r.u8()?,
            auxiliary_id: r.u8()?,
            capabilities: {
                r.zeros(2)?;
                r.u32()?
            },
            reserved: r.u32()?,
        };
        r.finish()?;
        Ok(v)
    }

    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u64(self.datapath_id);
        out.put_u32(self.n_buffers);
        out.put_u8(self.n_tables);
        out.put_u8(self.auxiliary_id);
        out.put_u16(0);
        out.put_u32(self.capabilities);
        out.put_u32(self.reserved);
    }
}

impl SwitchConfig {
    /// Body length.
    pub const LEN: usize = 4;
    /// `miss_send_len` value asking for whole packets (OFPCML_NO_BUFFER).
    pub const NO_BUFFER: u16 = 0xffff;

    pub fn parse(body: &[u8]) -> Result<SwitchConfig> {
        let mut r = Reader::new(body, "ofp_switch_config");
        let v = SwitchConfig { flags: r.u16()?, miss_send_len: r.u16()? };
        r.finish()?;
        Ok(v)
    }

    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(self.flags);
        out.put_u16(self.miss_send_len);
    }
}

/// Controller roles (`Role::role`).
pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const PRIMARY: u32 = 2;
    pub const SECONDARY: u32 = 3;
}

impl Role {
    /// Body length.
    pub const LEN: usize = 16;

    pub fn parse(body: &[u8]) -> Result<Role> {
        let mut r = Reader::new(body, "ofp_role_request");
        let role = r.u32()?;
        r.zeros(4)?;
        let v = Role { role, generation_id: r.u64()? };
        r.finish()?;
        Ok(v)
    }

    pub fn buffer_len(&self) -> usize {
        Self::LEN
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u32(self.role);
        out.put_u32(0);
        out.put_u64(self.generation_id);
    }
}
