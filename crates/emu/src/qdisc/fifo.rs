//! Drop-tail FIFO, limited in packets (tc's `pfifo`) or bytes (`bfifo`): the bloated baseline.
//! A FIFO of B bytes in front of a link of rate R holds a standing queue of up to B/R seconds.

use super::{Backlog, DropReason, QueueDiscipline, QueuedPacket, Sink};
use crate::spec::{Limit, SpecError, parse_limit};
use std::collections::VecDeque;
use std::time::Duration;

/// FIFO parameters.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FifoConfig {
    /// Maximum backlog. Default 1000 packets (pfifo's default on a txqueuelen-1000 device, and netem's).
    pub limit: Limit,
}

impl Default for FifoConfig {
    fn default() -> Self {
        FifoConfig {
            limit: Limit::Packets(1000),
        }
    }
}

impl FifoConfig {
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<bool, SpecError> {
        match key {
            "limit" => self.limit = parse_limit(value)?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The FIFO itself.
#[derive(Debug)]
pub struct Fifo {
    cfg: FifoConfig,
    queue: VecDeque<QueuedPacket>,
    backlog: Backlog,
}

impl Fifo {
    /// An empty FIFO.
    pub fn new(cfg: FifoConfig) -> Fifo {
        Fifo {
            cfg,
            queue: VecDeque::new(),
            backlog: Backlog::default(),
        }
    }
}

impl QueueDiscipline for Fifo {
    fn enqueue(&mut self, now: Duration, pkt: QueuedPacket, sink: &mut dyn Sink) {
        if self.backlog.would_exceed(self.cfg.limit, pkt.len()) {
            sink.dropped(now, pkt, DropReason::Overflow);
            return;
        }
        self.backlog.add(pkt.len());
        self.queue.push_back(pkt);
    }

    fn dequeue(&mut self, _now: Duration, _sink: &mut dyn Sink) -> Option<QueuedPacket> {
        let pkt = self.queue.pop_front()?;
        self.backlog.sub(pkt.len());
        Some(pkt)
    }

    fn backlog(&self) -> Backlog {
        self.backlog
    }
}
