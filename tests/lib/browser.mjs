// Headless Debian Chromium for the end-to-end tests, driven by playwright-core.
import { chromium } from 'playwright-core';

export const CHROMIUM_ARGS = [
  '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  '--no-first-run', '--disable-quic',
];

/** Launches Chromium; close it with `await browser.close()`. */
export async function launch() {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
}
