//! OFPT_METER_MOD and its bands.

use crate::error::{Error, Result};
use crate::wire::{len16, parse_list, tlv, Reader};
use bytes::{BufMut, Bytes, BytesMut};

/// OFPT_METER_MOD.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct MeterMod {
    /// 0 add, 1 modify, 2 delete.
    pub command: u16,
    /// 1 kbps, 2 pktps, 4 burst, 8 stats.
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MeterBand {
    Drop { rate: u32, burst_size: u32 },
    DscpRemark { rate: u32, burst_size: u32, prec_level: u8 },
    Unknown { band_type: u16, rate: u32, burst_size: u32, payload: Bytes },
}

/// Meter mod commands and flags.
pub mod meter {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
    pub const FLAG_KBPS: u16 = 1;
    pub const FLAG_PKTPS: u16 = 2;
    pub const FLAG_BURST: u16 = 4;
    pub const FLAG_STATS: u16 = 8;
    /// Meter id that rate-limits every packet-in of the bridge (`meter=controller`).
    pub const CONTROLLER: u32 = 0xffff_fffe;
    pub const ALL: u32 = 0xffff_ffff;
    pub const BAND_DROP: u16 = 1;
    pub const BAND_DSCP_REMARK: u16 = 2;
}

impl MeterBand {
    /// Parses one band from the start of `buf`; returns it and its length.
    fn parse(buf: &[u8]) -> Result<(MeterBand, usize)> {
        const WHAT: &str = "ofp_meter_band";
        let mut h = Reader::new(buf, WHAT);
        let band_type = h.u16()?;
        let len = usize::from(h.u16()?);
        let mut b = Reader::new(tlv(buf, len, 12, false, WHAT)?, WHAT);
        b.take(4)?;
        let rate = b.u32()?;
        let burst_size = b.u32()?;
        let band = match band_type {
            meter::BAND_DROP => {
                b.zeros(4)?;
                b.finish()?;
                MeterBand::Drop { rate, burst_size }
            }
            meter::BAND_DSCP_REMARK => {
                let prec_level = b.u8()?;
                b.zeros(3)?;
                b.finish()?;
                MeterBand::DscpRemark { rate, burst_size, prec_level }
            }
            _ => MeterBand::Unknown { band_type, rate, burst_size, payload: Bytes::copy_from_slice(b.rest()) },
        };
        Ok((band, len))
    }

    fn wire_len(&self) -> usize {
        match self {
            MeterBand::Drop { .. } | MeterBand::DscpRemark { .. } => 16,
            MeterBand::Unknown { payload, .. } => 12 + payload.len(),
        }
    }
}

impl MeterMod {
    pub fn parse(body: &[u8]) -> Result<MeterMod> {
        let mut r = Reader::new(body, "ofp_meter_mod");
        let command = r.u16()?;
        let flags = r.u16()?;
        let meter_id = r.u32()?;
        let bands = parse_list(r.rest(), MeterBand::parse)?;
        Ok(MeterMod { command, flags, meter_id, bands })
    }

    pub fn buffer_len(&self) -> usize {
        8 + self.bands.iter().map(MeterBand::wire_len).sum::<usize>()
    }

    pub(crate) fn check(&self) -> Result<()> {
        for b in &self.bands {
            if let MeterBand::Unknown { band_type, payload, .. } = b {
                if matches!(*band_type, meter::BAND_DROP | meter::BAND_DSCP_REMARK) {
                    return Err(Error::BadValue { what: "ofp_meter_band type", value: (*band_type).into() });
                }
                len16("ofp_meter_band", 12 + payload.len())?;
            }
        }
        Ok(())
    }

    pub fn emit(&self, out: &mut BytesMut) {
        out.put_u16(self.command);
        out.put_u16(self.flags);
        out.put_u32(self.meter_id);
        for b in &self.bands {
            let len = crate::wire::part_len16(b.wire_len());
            match b {
                MeterBand::Drop { rate, burst_size } => {
                    out.put_u16(meter::BAND_DROP);
                    out.put_u16(len);
                    out.put_u32(*rate);
                    out.put_u32(*burst_size);
                    out.put_u32(0);
                }
                MeterBand::DscpRemark { rate, burst_size, prec_level } => {
                    out.put_u16(meter::BAND_DSCP_REMARK);
                    out.put_u16(len);
                    out.put_u32(*rate);
                    out.put_u32(*burst_size);
                    out.put_u8(*prec_level);
                    out.put_bytes(0, 3);
                }
                MeterBand::Unknown { band_type, rate, burst_size, payload } => {
                    out.put_u16(*band_type);
                    out.put_u16(len);
                    out.put_u32(*rate);
                    out.put_u32(*burst_size);
                    out.put_slice(payload);
                }
            }
        }
    }
}
