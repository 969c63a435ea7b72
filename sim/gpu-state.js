'use strict';
/**
 * The simulated host's GPU state, shared by every simulated process (fake vLLM, fake trainer) and read by the
 * fake `nvidia-smi`. Plain CommonJS so the fake `nvidia-smi` starts in tens of milliseconds under plain `node`.
 *
 * A state directory holds:
 *   gpus.json               the inventory and nvidia-smi options (written once by whoever sets up the host)
 *   holders/<pid>-<gpu>.json one file per process holding memory on a GPU, written only by that process
 * One file per holder means writers never race (each writes its own file atomically with rename), and a
 * holder whose process is gone is simply ignored by readers: memory held by a dead pid is released, as on a
 * real GPU.
 */
const fs = require('node:fs');
const path = require('node:path');

const INVENTORY_FILE = 'gpus.json';
const HOLDERS_DIR = 'holders';

/** Writes `data` as JSON to `file` atomically (a reader never sees half a file). */
function writeJsonAtomic(file, data) {
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(data, null, 2)}\n`);
  fs.renameSync(tmp, file);
}

function readJson(file) {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

/** Creates the state directory and writes the inventory (GPUs, MIG flag, failure mode). */
function writeInventory(dir, inventory) {
  fs.mkdirSync(path.join(dir, HOLDERS_DIR), { recursive: true });
  writeJsonAtomic(path.join(dir, INVENTORY_FILE), inventory);
}

/** Reads the inventory; throws when the directory was never set up. */
function readInventory(dir) {
  return readJson(path.join(dir, INVENTORY_FILE));
}

/** Merges `patch` into the inventory's options (mig, lost, baselineMiB, fault). */
function updateInventory(dir, patch) {
  writeInventory(dir, { ...readInventory(dir), ...patch });
}

/**
 * The kernel's start time of `pid` (clock ticks since boot, /proc/<pid>/stat field 22) and its state letter;
 * null when the process does not exist or /proc is not available.
 */
function procStat(pid) {
  let text;
  try {
    text = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // The command name (field 2) is in parentheses and may contain spaces: parse after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: rest[0], pgrp: Number(rest[2]), startTime: rest[19] };
}

/** True when `pid` is a live process (a zombie counts as gone: it holds no memory). */
function isAlive(pid) {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (err && err.code === 'EPERM') return true;
    return false;
  }
  const stat = procStat(pid);
  return !stat || (stat.state !== 'Z' && stat.state !== 'X');
}

function holderFile(dir, pid, gpuIndex) {
  return path.join(dir, HOLDERS_DIR, `${pid}-${gpuIndex}.json`);
}

/**
 * Records that `pid` holds `usedMiB` on GPU `gpuIndex` (replacing its previous figure). 0 releases the memory.
 * `label` says what the process is (shown as nvidia-smi's process_name).
 */
function setHolding(dir, { pid = process.pid, gpuIndex, usedMiB, label = 'python3', migUuid }) {
  const file = holderFile(dir, pid, gpuIndex);
  if (!usedMiB) {
    fs.rmSync(file, { force: true });
    return;
  }
  const stat = procStat(pid);
  fs.mkdirSync(path.dirname(file), { recursive: true });
  const holder = { pid, gpuIndex, usedMiB, label, startTime: stat ? stat.startTime : null };
  writeJsonAtomic(file, migUuid ? { ...holder, migUuid } : holder);
}

/** Every holder whose process is still the one that wrote the file (same pid, same start time). */
function listLiveHolders(dir) {
  let names;
  try {
    names = fs.readdirSync(path.join(dir, HOLDERS_DIR));
  } catch {
    return [];
  }
  const holders = [];
  for (const name of names.sort()) {
    if (!name.endsWith('.json')) continue;
    let holder;
    try {
      holder = readJson(path.join(dir, HOLDERS_DIR, name));
    } catch {
      continue; // removed between readdir and read
    }
    if (!isAlive(holder.pid)) continue;
    const stat = procStat(holder.pid);
    // A recycled pid belongs to another process: the original holder is gone.
    if (stat && holder.startTime && stat.startTime !== holder.startTime) continue;
    holders.push(holder);
  }
  return holders;
}

module.exports = {
  INVENTORY_FILE,
  HOLDERS_DIR,
  writeJsonAtomic,
  writeInventory,
  readInventory,
  updateInventory,
  setHolding,
  listLiveHolders,
  isAlive,
  procStat,
};
